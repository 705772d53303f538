"""Runs the parity harness on the live stores and the exact oracle, and judges it (no Dagster)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.backends.pg.version import ServerVersions
from candlefire_pipeline.corpus.ledger import diff_inventory, expected_chunks, snapshot
from candlefire_pipeline.operations.adoption.reference import adoption_now, compare_with_app
from candlefire_pipeline.operations.conformance import check_stores
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline.operations.pg_versions import live_versions, store_versions
from candlefire_pipeline.operations.retirement.view import retired_stores, written_stores
from candlefire_pipeline.parity.gates import GateResult, evaluate_gates
from candlefire_pipeline.parity.harness import run_parity
from candlefire_pipeline.parity.queries import load_queries
from candlefire_pipeline.parity.report.files import load_latest
from candlefire_pipeline.parity.report.model import ParityReport
from candlefire_pipeline.parity.shadow.window import load_latest_window
from candlefire_pipeline.retrieval.rerank import load_reranker
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import ParityThresholds, Settings
from candlefire_pipeline.stores import CANDIDATE, GATED_STORES, ORACLE, REFERENCE

log = logging.getLogger(__name__)

LISTED_DIFF_IDS = 10  # chunk ids listed per kind in a report's ledger comparison


class OpenedStores(dict):
    """store name -> open backend, and the evaluated stores that could not be opened (why)."""

    def __init__(self) -> None:
        super().__init__()
        self.unavailable: dict[str, str] = {}


def build_oracle(
    settings: Settings, embedder, batch_keys: list[str] | None = None
) -> MemoryBackend:
    """The exact oracle: the given batches (default: every batch applied to any store) in order."""
    if batch_keys is None:
        ledger = snapshot(settings.batches_dir, settings.stores)
        batch_keys = sorted({k for applied in ledger.values() for k in applied})
    oracle = MemoryBackend(substring_mode=settings.substring_mode)
    for key in sorted(batch_keys):
        apply_batch(
            oracle, settings.batches_dir, key, embedder.model_id, embedder.dim, record_applied=False
        )
    log.info("oracle rebuilt from %d batches: %d chunks", len(batch_keys), oracle.count())
    return oracle


def _open_into(
    opened: OpenedStores, stack: ExitStack, name: str, opener: Callable[[], AbstractContextManager]
) -> None:
    """Open one store; an evaluated store that cannot be opened is noted, never fatal."""
    try:
        opened[name] = stack.enter_context(opener())
    except Exception as exc:
        if name in GATED_STORES:
            raise
        log.warning("parity: evaluated store %s unavailable, left out: %s", name, exc)
        opened.unavailable[name] = f"{type(exc).__name__}: {exc}"


@contextmanager
def open_stores(**resources) -> Iterator[OpenedStores]:
    """Open each store resource (anything with .open()) under its store name; closes them all."""
    with ExitStack() as stack:
        opened = OpenedStores()
        for name, resource in resources.items():
            _open_into(opened, stack, name, resource.open)
        yield opened


@contextmanager
def open_named_stores(settings: Settings) -> Iterator[OpenedStores]:
    """Every written store (the fed ones but a retired one) opened from settings (the CLI's
    way); closes them all."""
    with ExitStack() as stack:
        opened = OpenedStores()
        for name in written_stores(settings):
            _open_into(opened, stack, name, lambda n=name: opened_backend(n, settings))
        yield opened


def _ledger_diff(expected: dict[str, str], backend: VectorBackend) -> dict:
    diff = diff_inventory(expected, backend.chunk_hashes())
    return {
        **diff.counts(),
        **{f"{kind}_ids": ids[:LISTED_DIFF_IDS] for kind, ids in diff.as_dict().items() if ids},
    }


def run_report(
    settings: Settings,
    embedder,
    stores: dict,
    query_files: tuple[Path, ...] = (),
    include_default_queries: bool = True,
) -> ParityReport:
    """The full retriever on every store and the oracle over the committed (+ extra) queries.

    The ledger is read once, before anything else: the oracle, the ledger comparison and the
    freshness gate all refer to that state, so a batch applied during the run makes the report
    stale instead of letting it look fresh. With the reference retired, the exact oracle takes
    its place: the gates judge the candidate against it (and candle-fire's recorded answers).
    """
    started = datetime.now(UTC)
    retired = retired_stores(settings)
    ledger = snapshot(settings.batches_dir, settings.stores)
    keys = sorted({k for applied in ledger.values() for k in applied})
    queries = load_queries() if include_default_queries else []
    for extra in query_files:
        queries += load_queries(extra)
    expected = expected_chunks(settings.batches_dir, keys)
    unavailable = dict(getattr(stores, "unavailable", {}))
    stores = {name: backend for name, backend in stores.items() if name not in retired}
    store_diffs = {}
    for name, backend in list(stores.items()):
        try:
            store_diffs[name] = _ledger_diff(expected, backend)
        except Exception as exc:
            if name in GATED_STORES:
                raise
            unavailable[name] = f"{type(exc).__name__}: {exc}"
            del stores[name]
    backends = {**stores, ORACLE: build_oracle(settings, embedder, keys)}
    reranker = load_reranker(settings.retrieval.reranker_model)
    retrievers = {
        name: Retriever(backend, embedder, settings.retrieval, reranker)
        for name, backend in backends.items()
    }
    reference = ORACLE if REFERENCE in retired else REFERENCE
    report = run_parity(
        retrievers, queries, reference=reference, candidate=CANDIDATE, oracle=ORACLE
    )
    report.retired = {store: asdict(retirement) for store, retirement in retired.items()}
    report.conformance = check_stores(settings, report.backends)
    report.started_at = started.isoformat()
    report.ledger = {"read_at": started.isoformat(), "applied": ledger}
    report.store_diffs = {n: d for n, d in store_diffs.items() if n in report.backends}
    report.unavailable = {**unavailable, **report.unavailable}
    report.servers = store_versions(stores)
    report.app_collection = _app_reference(settings, embedder, stores[CANDIDATE], queries)
    record_evaluation(report, evaluate_report(settings, report), settings.parity)
    return report


def _app_reference(settings: Settings, embedder, candidate, queries) -> dict:
    """The app's own collection against the candidate; a failure is the section's error (the
    gate then holds the flip), never the report's."""
    try:
        return compare_with_app(settings, embedder, candidate, queries)
    except Exception as exc:
        log.warning("parity: the app's collection could not be compared: %s", exc)
        return {"error": f"{type(exc).__name__}: {exc}"}


def evaluate_report(settings: Settings, report: ParityReport) -> list[GateResult]:
    """THE evaluation of the gates: the report, the thresholds in settings, the ledger now and
    the latest shadow window (live evidence)."""
    try:
        ledger_now = snapshot(settings.batches_dir, settings.stores)
    except (OSError, ValueError, KeyError) as exc:
        log.warning("the ledger cannot be read (%s): freshness is unknown", exc)
        ledger_now = None
    return evaluate_gates(report, settings.parity, ledger_now, _pgvector_now(settings),
                          shadow=load_latest_window(settings.reports_dir),
                          adoption=adoption_now(settings))  # fmt: skip


def _pgvector_now(settings: Settings) -> ServerVersions | None:
    try:
        return live_versions(settings)
    except Exception as exc:  # unreadable = unknown, and the gate fails on it
        log.warning("the pgvector server's versions cannot be read (%s)", exc)
        return None


def record_evaluation(
    report: ParityReport, gates: list[GateResult], thresholds: ParityThresholds
) -> None:
    """Store the gate table in the report, with the thresholds it used (JSON and Markdown)."""
    report.gates = [g.to_dict() for g in gates]
    report.thresholds = asdict(thresholds)


def latest_evaluation(settings: Settings) -> tuple[ParityReport | None, list[GateResult]]:
    """The newest report on disk and its evaluation now ([] when there is no report)."""
    report = load_latest(settings.reports_dir)
    return report, (evaluate_report(settings, report) if report is not None else [])
