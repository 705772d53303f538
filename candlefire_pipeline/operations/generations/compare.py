"""`candlefire generation compare NAME`: the proof a generation needs before it serves.

The reference is what serves now (backend, generation); the candidate is the generation on a
backend (pgvector by default: where a promotion goes). When the candidate is what serves, the
reference is its rollback target: that comparison is how a serving generation is watched.
The full retriever runs on both over the committed query set (the parity harness), the
candidate's ANN recall is measured against its own exact oracle, every fed store of the
candidate is compared with its ledger, and a quality comparison on a judged set is made when
the vectors differ (docs/GENERATIONS.md, section 5).
"""

from __future__ import annotations

import logging
import math
import uuid
from contextlib import ExitStack, closing
from dataclasses import asdict
from datetime import UTC, datetime

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.corpus.ledger import StoreLedger, diff_inventory
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.generations.batches import behind
from candlefire_pipeline.generations.identity import Generation
from candlefire_pipeline.generations.registry import GenerationError, Registry
from candlefire_pipeline.generations.view import generation_settings, reports_dir
from candlefire_pipeline.operations.generations.lifecycle import (
    registry,
    serving_and_rollback,
    serving_target,
)
from candlefire_pipeline.operations.generations.quality import compare_quality
from candlefire_pipeline.operations.parity import build_oracle
from candlefire_pipeline.operations.retirement.view import written_stores
from candlefire_pipeline.parity import metrics
from candlefire_pipeline.parity.gates import GateResult
from candlefire_pipeline.parity.generation_gates import (
    OVERLAP,
    QUALITY,
    evaluate_generation_gates,
)
from candlefire_pipeline.parity.generation_report import GenerationReport, load_latest
from candlefire_pipeline.parity.harness import TOP_K, run_parity
from candlefire_pipeline.parity.queries import load_queries
from candlefire_pipeline.retrieval.rerank import load_reranker
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)

#: Where a generation is promoted to (Chroma is what rollbacks return to, never a promotion).
PROMOTION_BACKEND = "pgvector"


def kind_of(reference: Generation, candidate: Generation) -> tuple[str, str]:
    """(kind, why) of a comparison between two identities."""
    ref, cand = reference.identity, candidate.identity
    if cand.same_vectors(ref):
        return OVERLAP, (
            f"same vectors ({cand.embedding_id}) and chunker ({cand.chunker}); only the layout "
            f"differs ({ref.layout.describe()} -> {cand.layout.describe()}): overlap gates"
        )
    changed = [
        f"{what} {a} -> {b}"
        for what, a, b in (("model", ref.embedding_id, cand.embedding_id),
                           ("dim", ref.dim, cand.dim), ("chunker", ref.chunker, cand.chunker))
        if a != b
    ]  # fmt: skip
    return QUALITY, f"{', '.join(changed)}: rankings legitimately change, judged on quality"


def ledger_of(settings: Settings, generations: list[Generation]) -> dict:
    """ "<generation>/<store>" -> {batch: applied_at}, for every fed store of each generation."""
    out = {}
    for generation in generations:
        view = generation_settings(settings, generation)
        for store in written_stores(settings):
            out[f"{generation.name}/{store}"] = StoreLedger(view.batches_dir, store).applied()
    return out


def _side(backend: str, generation: Generation) -> dict:
    identity = generation.identity
    return {"backend": backend, "generation": generation.name, "gid": generation.gid,
            "identity": asdict(identity), "describe": identity.describe()}  # fmt: skip


def _store_diffs(settings: Settings, candidate: Generation, stack: ExitStack) -> tuple[dict, dict]:
    """Every fed store of the candidate against its ledger, and the stores that opened."""
    view = generation_settings(settings, candidate)
    diffs, opened = {}, {}
    for store in written_stores(settings):
        try:
            backend = stack.enter_context(closing(open_backend(store, view)))
            expected = StoreLedger(view.batches_dir, store).expected_chunks()
            diffs[store] = diff_inventory(expected, backend.chunk_hashes()).counts()
            opened[store] = backend
        except Exception as exc:
            diffs[store] = {"error": f"{type(exc).__name__}: {exc}"}
    return diffs, opened


def _ann_recall(oracle, backend, embedder, queries) -> float:
    """Mean chunk-level recall@15 of the candidate's search against its exact oracle."""
    recalls = []
    for query in queries:
        vector = embedder.embed([query.text])
        wanted = [r["chunk_id"] for r in oracle.semantic_candidates(vector, TOP_K)[0]]
        found = [r["chunk_id"] for r in backend.semantic_candidates(vector, len(wanted) or 1)[0]]
        recalls.append(metrics.recall(found, wanted))
    return metrics.mean(recalls) if recalls else 0.0


def _quality(settings: Settings, reference: Generation, candidate: Generation) -> dict:
    try:
        result = compare_quality(settings, reference, candidate).to_dict()
    except (OSError, ValueError) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    # JSON has no NaN: figures of an empty judged set are absent, and the gate says why
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.items()}


def resolve_sides(
    settings: Settings, known: Registry, name: str, backend: str | None
) -> tuple[tuple[str, Generation], tuple[str, Generation], bool]:
    """((reference backend, generation), (candidate backend, generation), watching): a candidate
    against what serves; or, watching, what serves against its rollback target."""
    serving, rollback = serving_and_rollback(settings)
    candidate, side = known.get(name), (backend or PROMOTION_BACKEND, name)
    if not candidate.live:
        raise GenerationError(f"generation {name!r} is {candidate.state}: nothing to compare")
    watching = side == serving
    reference = rollback if watching else serving
    if side == reference:
        raise GenerationError(f"{side[0]}/{name} is what serves: nothing to compare")
    return (reference[0], known.get(reference[1])), (side[0], candidate), watching


def watches_serving(settings: Settings, report: GenerationReport) -> bool:
    """The report compared what serves now (with its rollback target), not a candidate."""
    return report.target("candidate") == serving_target(settings)


def run_comparison(settings: Settings, name: str, backend: str | None = None) -> GenerationReport:
    """Compare generation `name` with what serves now; the report is judged, not written."""
    known = registry(settings)
    (ref_backend, reference), (cand_backend, candidate), watching = resolve_sides(
        settings, known, name, backend
    )
    if cand_backend not in written_stores(settings):
        raise GenerationError(f"{cand_backend} is retired or not fed: nothing of {name} to compare")
    started = datetime.now(UTC)
    ledger = ledger_of(settings, [reference, candidate])
    kind, why = kind_of(reference, candidate)
    if watching:
        why = f"what serves against its rollback target ({ref_backend}/{reference.name}); {why}"
    keys = (f"{ref_backend}@{reference.name}", f"{cand_backend}@{candidate.name}")
    ref_view, cand_view = (generation_settings(settings, g) for g in (reference, candidate))
    queries = load_queries()
    with ExitStack() as stack:
        store_diffs, opened = _store_diffs(settings, candidate, stack)
        if cand_backend not in opened:
            raise GenerationError(f"{cand_backend} of {name} cannot be opened: {store_diffs}")
        ref_store = stack.enter_context(closing(open_backend(ref_backend, ref_view)))
        embedders = [embedder_for(view, "query") for view in (ref_view, cand_view)]
        reranker = load_reranker(settings.retrieval.reranker_model)
        retrievers = {
            keys[0]: Retriever(ref_store, embedders[0], settings.retrieval, reranker),
            keys[1]: Retriever(opened[cand_backend], embedders[1], settings.retrieval, reranker),
        }
        parity = run_parity(retrievers, queries, reference=keys[0], candidate=keys[1], oracle=None)
        oracle = build_oracle(cand_view, embedders[1])
        recall = _ann_recall(oracle, opened[cand_backend], embedders[1], queries)
    parity.aggregates["ann_recall"] = {keys[1]: recall}
    created = datetime.now(UTC)
    report = GenerationReport(
        report_id=created.strftime("%Y%m%dT%H%M%S%fZ") + "-" + uuid.uuid4().hex[:8],
        created_at=created.isoformat(), started_at=started.isoformat(), kind=kind, why=why,
        reference=_side(ref_backend, reference), candidate=_side(cand_backend, candidate),
        parity=parity.to_dict(),
        quality=_quality(settings, reference, candidate) if kind == QUALITY else None,
        store_diffs=store_diffs, ledger={"read_at": started.isoformat(), "applied": ledger},
    )  # fmt: skip
    record_generation_evaluation(settings, report)
    return report


def evaluate_comparison(settings: Settings, report: GenerationReport) -> list[GateResult]:
    """THE evaluation of a comparison: its figures, the thresholds now, the ledgers read now."""
    known = registry(settings)
    try:
        sides = [
            known.get(report.reference["generation"]),
            known.get(report.candidate["generation"]),
        ]
        ledger_now = ledger_of(settings, sides)
        lag = behind(settings, sides[1], written_stores(settings))
        lag_now = {s: len(k) for s, k in lag.items()}
    except (OSError, ValueError, KeyError) as exc:
        log.warning("the ledger cannot be read (%s): freshness is unknown", exc)
        ledger_now, lag_now = None, None
    return evaluate_generation_gates(
        report, settings.parity, settings.generations, ledger_now, lag_now
    )


def record_generation_evaluation(settings: Settings, report: GenerationReport) -> None:
    report.gates = [g.to_dict() for g in evaluate_comparison(settings, report)]
    report.thresholds = {**asdict(settings.parity), "ndcg_drop": settings.generations.ndcg_drop}


def latest_comparison(
    settings: Settings, generation: Generation
) -> tuple[GenerationReport | None, list[GateResult]]:
    """The generation's newest comparison and its evaluation now ([] without one)."""
    report = load_latest(reports_dir(settings, generation))
    return report, (evaluate_comparison(settings, report) if report is not None else [])
