"""The reference column: candle-fire's search stages on the app's own collection against the
candidate (pgvector), query by query, every difference explained by the chunk ids behind it.

Two answers agree when every stage list (semantic, entity, keyword), the grounding booleans, the
RRF top 20 and the cited papers agree under the tie rule (conformance/lists.py: similarities
within 1e-5 may swap). A differing stage names the chunks on one side only or scored otherwise,
and each is explained from the current adoption report's classes: stale in the app (which drop
replaced or deleted its paper, or none holds it), new in the ledger, document / metadata /
vector differs (drift), or "displaced": the same chunk on both sides, moved by the others (or
an ANN miss, or a tie at a cut).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import TYPE_CHECKING

import pyarrow.parquet as pq

from candlefire_pipeline.operations.adoption.manifest import import_state
from candlefire_pipeline.operations.adoption.report import (
    AdoptionReport,
    latest_report,
    reports_dir,
)
from candlefire_pipeline.operations.adoption.source import (
    AdoptionError,
    AppCollection,
    current_fingerprint,
)
from candlefire_pipeline.parity.conformance.lists import compare_lists
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.settings import Settings

if TYPE_CHECKING:
    from candlefire_pipeline.backends.chroma.app_collection import AppCollectionBackend

log = logging.getLogger(__name__)

STAGES = {"semantic": "semantic", "entities": "entities", "keyword": "keyword",
          "rrf_top20": "fused"}  # fmt: skip
#: HNSW effort of the app's snapshot while it is compared: its content, not its graph, is judged
SNAPSHOT_EF_SEARCH = 1000
LISTED = 10


def adoption_now(settings: Settings) -> dict:
    """What the flip needs to know now: the app's fingerprint, the latest adoption report (its
    id and fingerprint) and the import of the current fingerprint; {} when none is configured."""
    app = settings.app_collection
    if not app.configured:
        return {}
    try:
        fingerprint = current_fingerprint(app)
    except (AdoptionError, OSError, RuntimeError) as exc:
        return {"error": f"the app's collection cannot be read now: {exc}"}
    report = latest_report(settings)
    return {
        "fingerprint": fingerprint,
        "report_id": report.report_id if report else None,
        "report_fingerprint": report.fingerprint if report else None,
        "imported": import_state(settings, fingerprint),
    }


def compare_with_app(settings: Settings, embedder, candidate, queries) -> dict:
    """The reference section of a parity report; {} when no app collection is configured."""
    if not settings.app_collection.configured:
        return {}
    now = adoption_now(settings)
    if "error" in now:
        return {"error": now["error"]}
    report = latest_report(settings)
    explain = _Explainer(settings, report if now["report_fingerprint"] == now["fingerprint"]
                         else None)  # fmt: skip
    with _app_backend(settings, embedder) as app:
        mine = Retriever(app, embedder, settings.retrieval)
        theirs = Retriever(candidate, embedder, settings.retrieval)
        rows = [_compare(q, mine.retrieve(q.text, q.entities, q.terms),
                         theirs.retrieve(q.text, q.entities, q.terms), explain)
                for q in queries]  # fmt: skip
    causes = Counter(c for row in rows for c in row["causes"])
    return {**now, "where": settings.app_collection.where, "queries": len(rows),
            "differing": sum(not row["equal"] for row in rows), "causes": dict(causes),
            "rows": rows}  # fmt: skip


class _app_backend:
    """The app's collection as a read-only store (on its snapshot: at SNAPSHOT_EF_SEARCH)."""

    def __init__(self, settings: Settings, embedder) -> None:
        self.settings, self.model = settings, (embedder.model_id, embedder.dim)

    def __enter__(self) -> AppCollectionBackend:
        from candlefire_pipeline.backends.chroma.app_collection import AppCollectionBackend

        app = self.settings.app_collection
        with AppCollection(app, self.settings.adoption_dir / "snapshots") as source:
            path = source.snapshot_path
        server = {} if path else {"host": app.host, "port": app.port, "token": app.token,
                                  "ssl": app.ssl, "ca_bundle": app.ca_bundle}  # fmt: skip
        ef = SNAPSHOT_EF_SEARCH if path else None
        self.backend = AppCollectionBackend(self.model, path=path, collection=app.collection,
                                            ef_search=ef, **server)  # fmt: skip
        return self.backend

    def __exit__(self, *exc) -> None:
        self.backend.close()


class _Explainer:
    """chunk id -> why it differs, from the current adoption report's classes."""

    def __init__(self, settings: Settings, report: AdoptionReport | None) -> None:
        self.classes: dict[str, tuple[str, str]] = {}
        self.current = report is not None
        if report is not None:
            path = reports_dir(settings) / report.report_id / "classes.parquet"
            table = pq.read_table(path, columns=["chunk_id", "class", "detail"])
            for cid, kind, detail in zip(*(table[c].to_pylist() for c in table.column_names),
                                         strict=True):  # fmt: skip
                self.classes[cid] = (kind, detail)

    def __call__(self, chunk_id: str, side: str) -> tuple[str, str]:
        if not self.current:
            return "unexplained", "no current adoption report (run `candlefire adopt report`)"
        kind, detail = self.classes.get(chunk_id, ("", ""))
        if kind == "identical":
            return "displaced", ("the same chunk on both sides, moved by the chunks above (or an "
                                 "ANN miss, or a tie at a cut)")  # fmt: skip
        if kind:
            return kind, detail
        if side == "candidate":
            return "new_since_report", "not in the app's collection: new since the report"
        return "unexplained", "not in the adoption report: re-run `candlefire adopt report`"


def _rows(rows: list[dict], score: str) -> list[tuple[str, str, float]]:
    return [(r["pmid"], r["chunk_id"], float(r[score])) for r in rows]


def _compare(query, app: Retrieval, cand: Retrieval, explain: _Explainer) -> dict:
    differences = []
    for name, field in STAGES.items():
        score = "rrf_score" if name == "rrf_top20" else "similarity"
        theirs, ours = _rows(getattr(app, field), score), _rows(getattr(cand, field), score)
        check = compare_lists(ours, theirs)
        if check.verdict != "identical":
            differences.append(
                {
                    "stage": name,
                    "detail": check.detail.replace("candle-fire", "the app"),
                    "chunks": _behind(theirs, ours, explain),
                }
            )
    if app.grounding != cand.grounding:
        terms = sorted(t for t in app.grounding if app.grounding[t] != cand.grounding.get(t))
        differences.append({"stage": "grounding", "detail": f"terms {terms[:LISTED]}",
                            "chunks": []})  # fmt: skip
    if app.pmids != cand.pmids and not differences:
        differences.append({"stage": "cited", "detail": "cited papers differ", "chunks": []})
    causes = sorted({c["cause"] for d in differences for c in d["chunks"]})
    return {"query_id": query.id, "equal": not differences, "differences": differences,
            "causes": causes, "app_top": app.pmids, "candidate_top": cand.pmids}  # fmt: skip


def _behind(theirs, ours, explain: _Explainer) -> list[dict]:
    """The chunks on one side only (or with another score), each with its cause."""
    app = {row[1]: row[2] for row in theirs}
    cand = {row[1]: row[2] for row in ours}
    found = []
    for side, held, other in (("app", app, cand), ("candidate", cand, app)):
        for chunk_id, score in held.items():
            if chunk_id in other and (side == "candidate" or abs(other[chunk_id] - score) <= 1e-5):
                continue  # agreeing, or already listed from the app's side
            where = "both" if chunk_id in other else side
            cause, detail = explain(chunk_id, side)
            found.append({"chunk_id": chunk_id, "side": where, "cause": cause, "detail": detail})
    return found[:LISTED]
