"""The import's store writes: every written store from the published parts, one after another.

A store is written part by part with the usual markers (operations/indexing.py), except an empty
pgvector table: it is loaded as one first build (backends/pg: one transaction, one build of every
index) instead of taking parts 2 on through its HNSW index row by row (62,196 rows: 31 s instead
of 147 s). That load writes each chunk once, in the app's insertion order, as the last part
holding its paper has it: what the parts applied one by one leave. The stores are written one
after another: on two cores, writing them at once took as long as their sum and held both in
memory.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict

import pyarrow as pa
import pyarrow.parquet as pq

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.operations.adoption.manifest import ImportManifest
from candlefire_pipeline.operations.indexing import ApplySummary, apply_batch, read_store_rows
from candlefire_pipeline.operations.retirement.view import store_writes, written_stores
from candlefire_pipeline.progress import ProgressMeter
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)

#: The intent a first build leaves on every part before its load (a part-by-part apply has none).
FIRST_BUILD = "first_build"
SUMMED = ("rows_written", "papers_replaced", "papers_unchanged", "papers_superseded")


def apply_everywhere(settings: Settings, manifest: ImportManifest,
                     emit: Callable[[str], None]) -> dict[str, dict]:  # fmt: skip
    """store -> {rows_written, papers_replaced, papers_unchanged, papers_superseded, seconds}."""
    return {store: _apply_store(settings, manifest, store, emit)
            for store in written_stores(settings)}  # fmt: skip


def _apply_store(settings: Settings, manifest: ImportManifest, store: str, emit) -> dict:
    started = time.perf_counter()
    with store_writes(settings, store), opened_backend(store, settings) as backend:
        loaded = _load_empty(settings, manifest, backend, emit)
        if loaded is not None:
            return {**loaded, "seconds": time.perf_counter() - started}
        summaries = []
        for index, key in enumerate(manifest.keys):
            summaries.append(apply_batch(backend, settings.batches_dir, key, manifest.model_id,
                                         manifest.dim))  # fmt: skip
            emit(f"import: {store} part {index + 1}/{len(manifest.keys)} applied")
    totals = {key: sum(asdict(s)[key] for s in summaries) for key in SUMMED}
    return {**totals, "seconds": time.perf_counter() - started}


def _load_empty(settings: Settings, manifest: ImportManifest, backend, emit) -> dict | None:
    """The whole import as one first build of an empty pgvector table (None: not taken)."""
    load = getattr(backend, "load_empty", None)
    if load is None:
        return None
    ledger = StoreLedger(settings.batches_dir, backend.name)
    final, parts = _final_versions(settings, manifest), {}
    if backend.count():
        return _built_before(settings, manifest, backend, ledger, final, emit)
    # the load commits before its markers are written: a run killed between the two finds these
    for key in manifest.keys:
        ledger.begin(key, {"batch_key": key, "started": time.time(), FIRST_BUILD: True})
    meter = ProgressMeter(f"import: {backend.name} first build", manifest.rows, emit, unit="rows")
    started = time.perf_counter()
    written = load(_first_appearances(settings, manifest, final, parts), (manifest.model_id,
                   manifest.dim), manifest.rows, progress=meter.update)  # fmt: skip
    if written is None:  # another writer got there first: apply part by part
        return None
    meter.finish()
    _record(settings, backend.name, parts, final, time.perf_counter() - started)
    papers = len(final)
    emit(f"import: {backend.name} {written} rows of {papers} papers in one first build")
    return {"rows_written": written, "papers_replaced": papers, "papers_unchanged": 0,
            "papers_superseded": 0}  # fmt: skip


def _built_before(settings: Settings, manifest: ImportManifest, backend, ledger: StoreLedger,
                  final: dict[str, tuple[str, str]], emit) -> dict | None:  # fmt: skip
    """A first build that committed and died before its markers: recorded now (None: the table
    holds anything else, so the parts are applied one by one).

    Applying them over the loaded table would replace each paper cut across two parts by its
    first part's chunks and put the rest back at the end: the app's order lost."""
    if set(manifest.keys) & set(ledger.applied()) or not all(
        _began_first_build(settings, ledger, key) for key in manifest.keys
    ):
        return None
    parts: dict[str, int] = {}
    rows = sum(t.num_rows for t in _first_appearances(settings, manifest, final, parts))
    if backend.count() != rows:
        return None
    _record(settings, backend.name, parts, final, 0.0)
    emit(f"import: {backend.name} first build found committed ({rows} rows); markers recorded")
    return {"rows_written": 0, "papers_replaced": 0, "papers_unchanged": len(final),
            "papers_superseded": 0}  # fmt: skip


def _began_first_build(settings: Settings, ledger: StoreLedger, key: str) -> bool:
    intent = settings.batch_dir(key) / ledger.intent_marker
    return intent.exists() and bool(json.loads(intent.read_text()).get(FIRST_BUILD))


def _record(settings: Settings, store: str, parts: dict[str, int],
            final: dict[str, tuple[str, str]], seconds: float) -> None:  # fmt: skip
    """Every part applied, recorded only now: the load was one transaction."""
    ledger = StoreLedger(settings.batches_dir, store)
    papers: dict[str, int] = {}
    for _, key in final.values():
        papers[key] = papers.get(key, 0) + 1
    for key, rows in parts.items():
        summary = ApplySummary(store, key, rows, papers.get(key, 0), 0, 0, 0, 0, seconds,
                               time.time())  # fmt: skip
        ledger.finish(key, asdict(summary) | {"first_build": True})


def _final_versions(settings: Settings, manifest: ImportManifest) -> dict[str, tuple[str, str]]:
    """pmid -> (paper_hash, batch_key) of the last part holding the paper."""
    final: dict[str, tuple[str, str]] = {}
    for key in manifest.keys:
        table = pq.read_table(settings.batch_dir(key) / "chunks.parquet",
                              columns=["pmid", "paper_hash"])  # fmt: skip
        for pmid, paper in zip(*(c.to_pylist() for c in table.columns), strict=True):
            final[pmid] = (paper, key)
    return final


def _first_appearances(settings: Settings, manifest: ImportManifest,
                       final: dict[str, tuple[str, str]],
                       written: dict[str, int]) -> Iterator[pa.Table]:  # fmt: skip
    """Each part's own rows (the chunks no earlier part held), as the last part has them;
    `written` gets each part's row count."""
    seen: set[str] = set()
    for key in manifest.keys:
        rows = read_store_rows(settings.batch_dir(key), key)
        ids = rows["chunk_id"].to_pylist()
        fresh = [chunk_id not in seen for chunk_id in ids]
        seen.update(ids)
        rows = rows.filter(pa.array(fresh))
        pmids = rows["pmid"].to_pylist()
        for name, at in (("paper_hash", 0), ("batch_key", 1)):
            values = pa.array([final[p][at] for p in pmids], rows.schema.field(name).type)
            rows = rows.set_column(rows.schema.get_field_index(name), name, values)
        written[key] = rows.num_rows
        yield rows
