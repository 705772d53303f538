"""What `candlefire status` reports: the switch and its pin, the gates of the latest report,
pending history, store reachability, and a retired store (since when; its files kept or gone)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from candlefire_pipeline.backends.factory import opened_backend, resolve_dsn
from candlefire_pipeline.backends.pg.terms.summary import CacheSummary, summarize
from candlefire_pipeline.backends.pg.version import ServerVersions
from candlefire_pipeline.generations.identity import DROPPED, DROPPING
from candlefire_pipeline.generations.registry import stored_registry
from candlefire_pipeline.generations.sizes import folder_bytes
from candlefire_pipeline.operations.parity import latest_evaluation
from candlefire_pipeline.operations.pg_versions import backend_versions
from candlefire_pipeline.operations.retirement.files import latest_export, local_folder
from candlefire_pipeline.operations.retirement.view import retired_stores
from candlefire_pipeline.operations.serving.history import pending_entries
from candlefire_pipeline.operations.serving.machine import ServingState, read_state, sync_history
from candlefire_pipeline.operations.serving.state import Retirement
from candlefire_pipeline.parity.gates import GateResult, failed, format_gate_table
from candlefire_pipeline.parity.shadow.window import ShadowWindow, load_latest_window
from candlefire_pipeline.settings import Settings, redact_dsn
from candlefire_pipeline.stores import PGVECTOR, QDRANT


@dataclass
class Status:
    serving: ServingState | None
    serving_error: str | None = None
    report_id: str | None = None
    report_created_at: str | None = None
    headline: dict[str, float] = field(default_factory=dict)
    gates: list[GateResult] = field(default_factory=list)
    thresholds: dict = field(default_factory=dict)
    pending_history: list[dict] = field(default_factory=list)
    chunk_counts: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    #: the auto-rollback policy: pin after this many failing windows in a row (None: off)
    rollback_after: int | None = None
    shadow: ShadowWindow | None = None  # the latest window of live shadow comparisons
    #: store -> its server's versions (Postgres stores only)
    versions: dict[str, ServerVersions] = field(default_factory=dict)
    #: pgvector's term cache (None: the table has none yet)
    term_cache: CacheSummary | None = None
    #: store -> what its retirement means now (since when; files kept or deleted)
    retired: dict[str, str] = field(default_factory=dict)
    #: generation -> what its drop means (gc), said as a retirement is
    dropped: dict[str, str] = field(default_factory=dict)

    @property
    def reachable(self) -> bool:
        return not self.errors and self.serving_error is None


def _where(settings: Settings, store: str) -> str:
    if store == PGVECTOR:
        return redact_dsn(settings.pg_dsn)
    if store == QDRANT:
        from candlefire_pipeline.backends.qdrant.server import redact_url

        return redact_url(settings.qdrant_url) if settings.qdrant_url else str(settings.qdrant_path)
    if settings.chroma_host:
        return f"http://{settings.chroma_host}:{settings.chroma_port}"
    return str(settings.chroma_path)


def collect_status(settings: Settings) -> Status:
    try:
        status = Status(serving=read_state(settings.serving_file))
    except ValueError as exc:
        status = Status(serving=None, serving_error=str(exc))
    status.rollback_after = settings.watch.rollback_after
    report, status.gates = latest_evaluation(settings)
    status.shadow = load_latest_window(settings.reports_dir)
    status.thresholds = asdict(settings.parity)
    if report is not None:
        status.report_id, status.report_created_at = report.report_id, report.created_at
        status.headline = report.headline()
    retired = retired_stores(settings)
    for store in settings.stores:
        if store in retired:  # not opened: its files may be gone
            status.retired[store] = _retired_files(settings, store, retired[store])
            continue
        try:
            with opened_backend(store, settings) as backend:
                status.chunk_counts[store] = backend.count()
                if store == PGVECTOR:  # Postgres answers: a good moment to replay history
                    status.versions[store] = backend_versions(backend)
                    status.term_cache = summarize(backend.conn, backend.names)
                    sync_history(settings, resolve_dsn(settings))
        except Exception as exc:  # any failure means unreachable, said plainly
            status.errors[store] = f"{type(exc).__name__} at {_where(settings, store)}: {exc}"
    status.pending_history = pending_entries(settings.serving_pending_file)
    status.dropped = dropped_generations(settings)
    return status


def dropped_generations(settings: Settings) -> dict[str, str]:
    """The generations gc dropped or is dropping, said the way a retired store is."""
    registry = stored_registry(settings)
    said = {}
    for generation in registry.generations if registry else ():
        if generation.state == DROPPING:
            said[generation.name] = (
                "DROPPING - not written; its targets and files are being "
                "removed; `candlefire generation gc --apply` finishes it"
            )
        elif generation.state == DROPPED:
            said[generation.name] = (
                f"DROPPED - since {generation.dropped_at}, not written; its targets and files "
                "removed (gc); no way back: create and build a new generation"
            )
    return said


def _retired_files(settings: Settings, store: str, retirement: Retirement) -> str:
    """Said as a dropped generation is: since when, not written, its files, the way back."""
    export, folder = latest_export(settings, store), local_folder(settings, store)
    if folder is not None and folder.exists():
        files = f"files kept in {folder} ({folder_bytes(folder) / 1e6:.1f} MB)"
    elif folder is not None:
        files = "files deleted" + (f" (ledger state exported to {export})" if export else "")
    else:
        files = "collections on the server" + (f"; ledger exported to {export}" if export else "")
    report = f" (report {retirement.report_id})" if retirement.report_id else ""
    return (
        f"since {retirement.since}{report}, not written; {files}; `candlefire unretire {store} "
        '--reason "..."` rebuilds it from the ledger'
    )


def format_status(status: Status) -> str:
    s = status.serving
    if s is None:
        lines = [f"serving backend: UNKNOWN - {status.serving_error}"]
    else:
        lines = [f"serving backend: {s.backend}", f"  state: {s.describe()}"]
        lines.append(f"  generation: {s.generation}; {s.way_back()}")
        lines.append(
            f"  last change: {s.changed_at or 'never'} by {s.actor or '-'} "
            f"({s.event or '-'}); report: {s.report_id or '-'}; {s.reason}"
        )
        if s.degraded:
            policy = status.rollback_after
            lines.append(
                f"  DEGRADED: pgvector still serves; {s.way_back()}; auto-rollback "
                + (f"after {policy} failing windows in a row" if policy else "is off")
            )
    if status.pending_history:
        lines.append(
            f"  history PENDING: {len(status.pending_history)} change(s) not yet in Postgres; "
            "replayed on the next successful connection"
        )
    if status.report_id:
        names = failed(status.gates)
        verdict = f"FAILS {', '.join(names)}" if names else "passes every gate"
        lines.append(
            f"last parity report: {status.report_id} ({status.report_created_at}): {verdict}"
        )
        lines += [f"  {k}: {v:.4g}" for k, v in sorted(status.headline.items())]
        lines += [
            "gates (evaluated now, thresholds from settings):",
            format_gate_table(status.gates),
        ]
    else:
        lines.append("last parity report: none (no gate can pass)")
    lines += _shadow_lines(status.shadow)
    for store, count in status.chunk_counts.items():
        versions = status.versions.get(store)
        lines.append(f"{store}: {count} chunks" + (f" ({versions.describe()})" if versions else ""))
        if versions is not None and versions.below_floor():
            lines.append(f"{store}: BELOW THE VERSION FLOOR - {versions.floor_problem()}")
        if store == PGVECTOR and status.term_cache is not None:
            lines.append(f"{store}: {status.term_cache.describe()}")
    for store, error in status.errors.items():
        lines.append(f"{store}: UNREACHABLE - {error}")
    for store, said in status.retired.items():
        lines.append(f"{store}: RETIRED - {said}")
    for name, said in status.dropped.items():
        lines.append(f"generation {name}: {said}")
    return "\n".join(lines)


def _shadow_lines(window: ShadowWindow | None) -> list[str]:
    if window is None:
        return ["last shadow window: none (shadow reads off, or shadow_parity never ran)"]
    lines = [f"last shadow window: {window.window_id} (until {window.until[:19]} UTC, "
             f"{window.window_minutes} min)"]  # fmt: skip
    for t in window.targets:
        agreement = (
            f"mean overlap {t.mean_overlap:.3f}, grounding {t.grounding_agreement:.3f}"
            if t.compared
            else "nothing compared"
        )
        lines.append(f"  {t.pair}: {t.samples} samples, {agreement}, {t.errors} errors")
    return lines
