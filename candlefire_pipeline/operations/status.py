"""What `candlefire status` reports: the switch, the last parity report, store reachability."""

from __future__ import annotations

from dataclasses import dataclass, field

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.operations.serving import ServingState, read_state
from candlefire_pipeline.parity.report import load_latest
from candlefire_pipeline.settings import Settings, redact_dsn


@dataclass
class Status:
    serving: ServingState
    report_id: str | None = None
    report_created_at: str | None = None
    headline: dict[str, float] = field(default_factory=dict)
    chunk_counts: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def reachable(self) -> bool:
        return not self.errors


def _where(settings: Settings, store: str) -> str:
    if store == "pgvector":
        return redact_dsn(settings.pg_dsn)
    if store == "qdrant":
        from candlefire_pipeline.backends.qdrant_server import redact_url

        return redact_url(settings.qdrant_url) if settings.qdrant_url else str(settings.qdrant_path)
    if settings.chroma_host:
        return f"http://{settings.chroma_host}:{settings.chroma_port}"
    return str(settings.chroma_path)


def collect_status(settings: Settings) -> Status:
    status = Status(serving=read_state(settings.serving_file))
    report = load_latest(settings.reports_dir)
    if report is not None:
        status.report_id, status.report_created_at = report.report_id, report.created_at
        status.headline = report.headline()
    for store in settings.stores:
        try:
            backend = open_backend(store, settings)
            try:
                status.chunk_counts[store] = backend.count()
            finally:
                backend.close()
        except Exception as exc:  # noqa: BLE001 - any failure means unreachable, said plainly
            status.errors[store] = f"{type(exc).__name__} at {_where(settings, store)}: {exc}"
    return status


def format_status(status: Status) -> str:
    s = status.serving
    lines = [f"serving backend: {s.backend}"]
    lines.append(f"  changed: {s.changed_at or 'never'}; report: {s.report_id or '-'}; {s.reason}")
    if status.report_id:
        lines.append(f"last parity report: {status.report_id} ({status.report_created_at})")
        lines += [f"  {k}: {v:.4g}" for k, v in sorted(status.headline.items())]
    else:
        lines.append("last parity report: none")
    for store, count in status.chunk_counts.items():
        lines.append(f"{store}: {count} chunks")
    for store, error in status.errors.items():
        lines.append(f"{store}: UNREACHABLE - {error}")
    return "\n".join(lines)
