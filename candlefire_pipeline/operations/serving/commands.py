"""The serving verbs: auto_promote (the serving_backend asset), promote and rollback (operators).

Each one gathers its evidence and a Postgres DSN for the history, then goes through the state
machine in operations/serving/machine.py; none writes anything itself.
"""

from __future__ import annotations

import getpass
import logging
from dataclasses import dataclass

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import opened_backend, resolve_dsn
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.operations.parity import (
    evaluate_report,
    latest_evaluation,
    open_named_stores,
    run_report,
)
from candlefire_pipeline.operations.serving.machine import (
    AUTO_PROMOTE,
    PROMOTE,
    REFUSED,
    ROLLBACK,
    Decision,
    Evidence,
    Outcome,
    ServingState,
    read_state,
    require_reason,
    transition,
)
from candlefire_pipeline.parity.gates import failed
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE

log = logging.getLogger(__name__)

ASSET_ACTOR = "dagster:serving_backend"


def operator() -> str:
    """Who runs the command (recorded with a pin or a promotion)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no login name in some containers
        return "unknown-operator"


@dataclass(frozen=True)
class Order:
    """An operator's order to move the switch: the verb that gave it, why and who."""

    verb: str
    reason: str
    actor: str

    def __post_init__(self) -> None:
        # refused when the order is made, before a command reads or rebuilds anything
        require_reason(self.verb, self.reason)


def history_dsn(settings: Settings) -> str | None:
    """Where the history goes, without starting anything: the configured DSN, or the embedded
    server only if it is already running (else the entry waits in the local queue)."""
    if settings.pg_dsn:
        return settings.pg_dsn
    try:
        return EmbeddedPostgres(settings.pg_data_dir).running_dsn()
    except Exception as exc:  # an unreadable pid file must not stop a rollback
        log.warning("embedded Postgres state unreadable (%s); history stays queued", exc)
        return None


def rollback(settings: Settings, order: Order) -> Outcome:
    """Back at once to the recorded previous (backend, generation), pinned (Chroma from the
    default generation); works with Postgres down (the history entry is then queued): the
    target is in the switch file, nothing else is read."""
    return transition(settings, ROLLBACK, order.reason, order.actor, dsn=history_dsn(settings))


def auto_promote(settings: Settings, report, gates, dsn: str | None) -> Outcome:
    """What a scheduled or re-run serving_backend does: promote only from the never-promoted
    state, on a report passing every gate (evaluated now)."""
    names = failed(list(gates))
    verdict = (
        "no parity report yet"
        if report is None
        else (f"failed gates: {', '.join(names)}" if names else "all gates passed")
    )
    reason = f"parity report {report.report_id if report else '-'}: {verdict}"
    return transition(
        settings, AUTO_PROMOTE, reason, ASSET_ACTOR, Evidence.of(report, gates), dsn=dsn
    )


def promote(
    settings: Settings, order: Order, run_new_report: bool = False, embedder=None
) -> Outcome:
    """The operator's way to pgvector (and the only way out of a pin).

    Refuses, writing nothing, unless pgvector answers and the latest report (a new one when
    run_new_report) passes every gate and started after the pin.
    """
    current = read_state(settings.serving_file)
    try:
        dsn = resolve_dsn(settings)
        check_pgvector(settings)
    except (BackendUnavailableError, psycopg.Error) as exc:
        return refusal(PROMOTE, current, unreachable(exc))
    if run_new_report:
        report = _run_and_write_report(settings, embedder)
        gates = evaluate_report(settings, report)
    else:
        report, gates = latest_evaluation(settings)
    return transition(
        settings, PROMOTE, order.reason, order.actor, Evidence.of(report, gates), dsn=dsn
    )


def refusal(event: str, current: ServingState, message: str) -> Outcome:
    return Outcome(Decision(event, current.state, current.state, REFUSED, message), current)


def unreachable(exc: Exception) -> str:
    why = exc if isinstance(exc, BackendUnavailableError) else type(exc).__name__
    return f"pgvector is unreachable, nothing changed: {why}"


def check_pgvector(settings: Settings) -> None:
    with opened_backend(CANDIDATE, settings) as backend:
        backend.count()


def _run_and_write_report(settings: Settings, embedder):
    if embedder is None:
        from candlefire_pipeline.embedding import embedder_for

        embedder = embedder_for(settings, "query")
    with open_named_stores(settings) as stores:
        report = run_report(settings, embedder, stores)
    write_report(report, settings.reports_dir)
    log.info("parity report %s written", report.report_id)
    return report
