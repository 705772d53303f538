"""Every chunk id of the app's collection and of the ledger, in exactly one class.

- identical: the same document, metadata (as mapped) and vector (within 1e-6 cosine distance);
- only_in_app: stale in the app's collection: its paper was deleted by a drop, replaced by a drop
  (the drop's version of the paper has other chunk ids: full text arrived, sections changed), or
  never was in the ledger; a bare-pmid abstract chunk beside its own paper's section chunks is
  flagged as stale either way (candle-fire's indexer never removes it);
- only_in_ledger: new since the app's collection was built (the batch that brought it);
- document_differs (where the texts first differ), metadata_differs (which keys), vector_differs
  (the cosine distance), in that order of precedence.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from candlefire_pipeline.operations.adoption.mapping import COMPARED
from candlefire_pipeline.operations.adoption.staging import READ_ROWS, Staging

CLASSES = ("identical", "only_in_app", "only_in_ledger", "document_differs", "metadata_differs",
           "vector_differs")  # fmt: skip
#: A vector is the same when its cosine distance to the other side's is at most this.
VECTOR_TOLERANCE = 1e-6
#: Examples kept per class in the report (every id is in classes.parquet).
EXAMPLES = 5
CONTEXT = 30
CLASS_SCHEMA = pa.schema([("chunk_id", pa.string()), ("pmid", pa.string()),
                          ("class", pa.string()), ("detail", pa.string()),
                          ("distance", pa.float64())])  # fmt: skip


@dataclass
class Classification:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    stale_reasons: Counter = field(default_factory=Counter)
    metadata_keys: Counter = field(default_factory=Counter)
    #: cosine distances of every pair whose vectors differ (document equal or not)
    distances: list[float] = field(default_factory=list)
    examples: dict[str, list[dict]] = field(default_factory=dict)
    stale_papers: int = 0
    dims: tuple[int | None, int | None] = (None, None)

    def add(self, record: dict) -> None:
        self.counts[record["class"]] += 1
        kept = self.examples.setdefault(record["class"], [])
        if len(kept) < EXAMPLES:
            kept.append(record)

    def distance_figures(self) -> dict:
        if not self.distances:
            return {"differing": 0}
        values = np.asarray(self.distances)
        return {"differing": len(values), "min": float(values.min()),
                "p50": float(np.median(values)), "p95": float(np.percentile(values, 95)),
                "max": float(values.max())}  # fmt: skip

    def to_dict(self) -> dict:
        return {
            "counts": self.counts,
            "stale_reasons": dict(self.stale_reasons),
            "stale_papers": self.stale_papers,
            "metadata_keys": dict(self.metadata_keys.most_common()),
            "vector_distance": self.distance_figures(),
            "examples": self.examples,
        }


def classify(staging: Staging, out: Path) -> Classification:
    """Classify every id of both sides into `out` (classes.parquet); the summary."""
    result = Classification()
    out.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(out, CLASS_SCHEMA) as writer:
        for records in _pages(_app_side(staging, result)):
            _write(writer, records, result)
        for records in _pages(_ledger_only(staging)):
            _write(writer, records, result)
    result.stale_papers = staging.db.execute(
        "SELECT count(DISTINCT pmid) FROM app a WHERE chunk_id = pmid AND EXISTS "
        "(SELECT 1 FROM app b WHERE b.pmid = a.pmid AND b.chunk_id != b.pmid)"
    ).fetchone()[0]
    return result


def _pages(records: Iterator[dict]) -> Iterator[list[dict]]:
    page = []
    for record in records:
        page.append(record)
        if len(page) >= READ_ROWS:
            yield page
            page = []
    if page:
        yield page


def _write(writer: pq.ParquetWriter, records: list[dict], result: Classification) -> None:
    for record in records:
        result.add(record)
    writer.write_table(pa.Table.from_pylist(records, schema=CLASS_SCHEMA))


def _record(chunk_id, pmid, kind, detail, distance=None) -> dict:
    return {"chunk_id": chunk_id, "pmid": pmid, "class": kind, "detail": detail,
            "distance": distance}  # fmt: skip


def _app_side(staging: Staging, result: Classification) -> Iterator[dict]:
    query = """
    SELECT a.seq, a.chunk_id, a.pmid, a.row, a.vector, l.row, l.vector, l.batch_key,
        (SELECT batch_key FROM ledger x WHERE x.pmid = a.pmid LIMIT 1),
        (SELECT batch_key FROM deleted d WHERE d.pmid = a.pmid),
        (a.chunk_id = a.pmid AND EXISTS (SELECT 1 FROM app b WHERE b.pmid = a.pmid
                                          AND b.chunk_id != b.pmid))
    FROM app a LEFT JOIN ledger l ON l.chunk_id = a.chunk_id
    WHERE a.seq > ? ORDER BY a.seq LIMIT ?"""
    after = 0
    while True:
        page = staging.db.execute(query, [after, READ_ROWS]).fetchall()
        if not page:
            return
        for row in page:
            yield _classify_pair(row, result)
        after = page[-1][0]


def _classify_pair(row: tuple, result: Classification) -> dict:
    (
        _,
        chunk_id,
        pmid,
        app_json,
        app_vec,
        ledger_json,
        ledger_vec,
        batch,
        holder,
        deleter,
        beside,
    ) = row
    if ledger_json is None:
        reason, detail = _stale_reason(holder, deleter, bool(beside))
        result.stale_reasons[reason] += 1
        return _record(chunk_id, pmid, "only_in_app", f"{reason}: {detail}")
    app, ledger = json.loads(app_json), json.loads(ledger_json)
    distance = _distance(app_vec, ledger_vec, result)
    if distance is not None and distance > VECTOR_TOLERANCE:
        result.distances.append(distance)
    if app["document"] != ledger["document"]:
        return _record(
            chunk_id,
            pmid,
            "document_differs",
            first_difference(app["document"], ledger["document"]),
            distance,
        )
    keys = [k for k in COMPARED if app[k] != ledger[k]]
    if keys:
        result.metadata_keys.update(keys)
        detail = "; ".join(f"{k}: app {app[k]!r:.60}, ledger {ledger[k]!r:.60}" for k in keys)
        return _record(chunk_id, pmid, "metadata_differs", detail, distance)
    if distance is None or distance > VECTOR_TOLERANCE:
        what = "other dimensions" if distance is None else f"cosine distance {distance:.3g}"
        return _record(chunk_id, pmid, "vector_differs", f"{what} (ledger batch {batch})",
                       distance)  # fmt: skip
    return _record(chunk_id, pmid, "identical", "", distance)


#: Why a chunk is only in the app's collection (STALE_REASONS[kind] explains each kind).
STALE_REASONS = {
    "replaced": "a drop holds the paper with other chunk ids (full text arrived, sections "
    "changed): this chunk goes when that drop's version is applied",
    "deleted": "a drop deleted the paper",
    "never_in_ledger": "no drop holds the paper (it stays until one does)",
}


def _stale_reason(holder: str | None, deleter: str | None, beside: bool) -> tuple[str, str]:
    if holder is not None:
        kind, detail = "replaced", f"the paper's current version is in {holder}"
    elif deleter is not None:
        kind, detail = "deleted", f"deleted by {deleter}"
    else:
        kind, detail = "never_in_ledger", "no drop holds the paper"
    if beside:
        detail += "; a bare-pmid abstract chunk beside its paper's own section chunks"
    return kind, detail


def _distance(app_vec: bytes, ledger_vec: bytes, result: Classification) -> float | None:
    a, b = np.frombuffer(app_vec, np.float32), np.frombuffer(ledger_vec, np.float32)
    result.dims = (len(a), len(b))
    if len(a) != len(b):
        return None
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return float(1.0 - a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


def _ledger_only(staging: Staging) -> Iterator[dict]:
    query = """SELECT l.chunk_id, l.pmid, l.batch_key FROM ledger l
    WHERE l.chunk_id > ? AND NOT EXISTS (SELECT 1 FROM app a WHERE a.chunk_id = l.chunk_id)
    ORDER BY l.chunk_id LIMIT ?"""
    after = ""
    while True:
        page = staging.db.execute(query, [after, READ_ROWS]).fetchall()
        if not page:
            return
        for chunk_id, pmid, batch in page:
            yield _record(chunk_id, pmid, "only_in_ledger", f"new in {batch}")
        after = page[-1][0]


def first_difference(app: str, ledger: str) -> str:
    """Where two texts first differ, with a little context on each side."""
    at = next((i for i, (x, y) in enumerate(zip(app, ledger, strict=False)) if x != y),
              min(len(app), len(ledger)))  # fmt: skip
    start = max(at - CONTEXT, 0)
    return (
        f"first differs at character {at}: app {app[start : at + CONTEXT]!r}, ledger "
        f"{ledger[start : at + CONTEXT]!r} ({len(app)} vs {len(ledger)} characters)"
    )
