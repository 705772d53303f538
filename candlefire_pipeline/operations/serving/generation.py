"""`candlefire promote --generation NAME`: serve an index generation, on the evidence of its
latest comparison with what serves now (operations/generations/compare.py).

The command gathers the evidence (the registry, the comparison and its gates evaluated now,
pgvector answering) and goes through the state machine like every other serving verb.
"""

from __future__ import annotations

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.factory import resolve_dsn
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.generations.registry import GenerationError
from candlefire_pipeline.generations.view import generation_settings
from candlefire_pipeline.operations.generations.compare import PROMOTION_BACKEND, latest_comparison
from candlefire_pipeline.operations.generations.lifecycle import registry
from candlefire_pipeline.operations.serving.commands import (
    Order,
    check_pgvector,
    refusal,
    unreachable,
)
from candlefire_pipeline.operations.serving.machine import (
    PROMOTE_GENERATION,
    Evidence,
    Outcome,
    Target,
    read_state,
    transition,
)
from candlefire_pipeline.settings import Settings


def comparison_evidence(settings: Settings, generation: Generation, wanted: Target) -> Evidence:
    """The generation's latest comparison, its gates evaluated now (ledgers read now), and the
    (reference, candidate) it compared; only the registry state when it is not live."""
    if not generation.live:
        return Evidence(wanted=wanted, wanted_state=generation.state)
    report, gates = latest_comparison(settings, generation)
    if report is None:
        return Evidence(wanted=wanted, wanted_state=generation.state)
    compared = (Target(*report.target("reference")), Target(*report.target("candidate")))
    return Evidence(
        report.report_id, report.started_at or None, tuple(gates),
        wanted=wanted, wanted_state=generation.state, compared=compared,
    )  # fmt: skip


def promote_generation(
    settings: Settings, name: str, order: Order, backend: str = PROMOTION_BACKEND
) -> Outcome:
    """Serve generation `name` on `backend` (pgvector), recording where a rollback returns.

    Refuses, writing nothing, unless the generation is live, pgvector answers, and its latest
    comparison was made against what serves now, passes every gate now and (from a pin)
    started after the pin.
    """
    current = read_state(settings.serving_file)
    if backend != PROMOTION_BACKEND:
        return refusal(PROMOTE_GENERATION, current, (
            f"a generation is promoted to {PROMOTION_BACKEND}, not {backend}: Chroma serves the "
            "default generation only (it is where rollbacks end)"
        ))  # fmt: skip
    try:
        generation = registry(settings).get(name)
    except GenerationError as exc:
        return refusal(PROMOTE_GENERATION, current, f"{exc}: nothing to promote")
    try:
        dsn = resolve_dsn(settings)
        if generation.live:
            check_pgvector(generation_settings(settings, generation))
    except (BackendUnavailableError, psycopg.Error) as exc:
        return refusal(PROMOTE_GENERATION, current, unreachable(exc))
    evidence = comparison_evidence(settings, generation, Target(backend, name))
    return transition(settings, PROMOTE_GENERATION, order.reason, order.actor, evidence, dsn=dsn)
