"""One shadow comparison: a served request replayed on one target, judged like a parity query.

The served answer is the reference, the target the candidate: the overlap of the papers the app
cites (top 15 plus landscape-only hits, as the parity report compares them), the grounding and
keyword agreement, and `parity.harness.compare_runs` traces every difference to its cause
(parity/tracing.py). There is no exact oracle on live traffic, so an approximate-search
miss is traced as `other`; a chunk one store lacks (from a periodic inventory) as `missing_chunk`.
"""

from __future__ import annotations

import logging
import time
import uuid

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.operations.shadow.records import ShadowRecord, query_hash
from candlefire_pipeline.operations.shadow.served import ShadowJob, ShadowTarget
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.parity.harness import compare_runs
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.tracing import TraceContext, compare_inventory

log = logging.getLogger(__name__)

#: Divergence fields that may quote the query (its terms); kept only with the text.
QUERY_FIELDS = ("term", "detail", "query_id")
#: Seconds an inventory (chunk ids and hashes of both stores, for tracing) stays in use.
INVENTORY_TTL_S = 1800.0


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:500]


def compare_on_target(replayer, job: ShadowJob, target: ShadowTarget) -> ShadowRecord:
    """The record of `job` replayed on `target` (an error record if the read fails)."""
    keep = replayer.settings.shadow.keep_text
    record = ShadowRecord(
        record_id=uuid.uuid4().hex,
        recorded_at=job.recorded_at,
        query_hash=query_hash(job.query, job.entities, job.terms),
        served_store=job.served_store,
        shadow_store=target.name,
        served_ms=job.served_ms,
        query_text=job.query if keep else None,
        entities=list(job.entities) if keep else None,
        terms=list(job.terms) if keep and job.terms is not None else None,
    )
    try:
        retriever = replayer.retriever(target.name, lambda: target.open(replayer.settings))
        started = time.perf_counter()
        terms = None if job.terms is None else list(job.terms)
        answer = retriever.retrieve(job.query, list(job.entities), terms)
        seconds = time.perf_counter() - started
    except Exception as exc:  # any failure of the shadow read is its record
        replayer.forget(target.name)
        record.error = _one_line(exc)
        return record
    record.shadow_ms = seconds * 1000.0
    served, shadow = job.served, answer
    # the papers the app cites, as the parity report compares them (parity.harness.compare_runs)
    record.overlap = metrics.overlap(shadow.pmids, served.pmids)
    record.grounding_equal = served.grounding == shadow.grounding
    record.keyword_equal = set(served.keyword_pmids) == set(shadow.keyword_pmids)
    if record.overlap < 1.0 or not (record.grounding_equal and record.keyword_equal):
        record.divergences = _traced(replayer, job, target, answer, seconds, keep)
    return record


def _traced(replayer, job: ShadowJob, target: ShadowTarget, answer, seconds, keep) -> list[dict]:
    """The divergences, traced; a failure of the tracing itself is one `other` divergence."""
    query = ParityQuery(query_hash(job.query, job.entities, job.terms)[:12], job.query,
                        job.entities, job.terms)  # fmt: skip
    runs = {job.served_store: job.served, target.name: answer}
    times = {job.served_store: job.served_ms / 1000.0, target.name: seconds}
    try:
        ctx = _context(replayer, job.served_store, target)
        _, found = compare_runs(ctx, query, runs, times)
        traced = [vars(d).copy() for d in found]
    except Exception as exc:  # the comparison stands without its causes
        log.warning("shadow: tracing failed (%s)", _one_line(exc))
        traced = [{"kind": "other", "field": "trace", "detail": f"not traced: {_one_line(exc)}"}]
    if not keep:
        for divergence in traced:
            for name in QUERY_FIELDS:
                divergence.pop(name, None)
    return traced


def _context(replayer, served: str, target: ShadowTarget) -> TraceContext:
    """The served store (reference) and the target (candidate) with a recent inventory."""
    pair = (served, target.name)
    made_at, ctx = replayer.contexts.get(pair, (None, None))
    if ctx is not None and time.monotonic() - made_at < INVENTORY_TTL_S:
        return ctx
    retrievers = {
        served: replayer.retriever(served, lambda: open_backend(served, replayer.settings)),
        target.name: replayer.retrievers[target.name],
    }
    _, _, ctx = compare_inventory(retrievers, served, target.name, None)
    replayer.contexts[pair] = (time.monotonic(), ctx)
    return ctx
