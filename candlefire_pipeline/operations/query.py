"""`candlefire query`: the full retriever on one backend, formatted for a terminal."""

from __future__ import annotations

from contextlib import closing

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.parity import build_oracle
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.retirement.view import retired_note, retired_stores
from candlefire_pipeline.retrieval.rerank import load_reranker
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import ORACLE

SERVING = "serving"  # follow the switch, exactly as the app does (operations/reader.py)


def run_query(
    settings: Settings,
    backend_name: str,
    text: str,
    entities: list[str],
    terms: list[str] | None,
) -> tuple[str, Retrieval]:
    """(backend used, retrieve() result) on one backend, or (backend_name "serving") on the one
    the switch names, read exactly as the app reads it."""
    retirement = retired_stores(settings).get(backend_name)
    if retirement is not None:  # opening it would answer from stale (or recreated) files
        raise ValueError(
            f"{retired_note(backend_name, retirement)}: nothing to query; `candlefire unretire "
            f"{backend_name} --reason ...` rebuilds it"
        )
    embedder = embedder_for(settings, "query")
    if backend_name == SERVING:
        with ServingReader(settings, embedder) as reader:
            retriever = reader.retriever()
            return reader.backend_name, retriever.retrieve(text, entities, terms)
    if backend_name == ORACLE:  # rebuilt from the ledger, in this process
        opened = closing(build_oracle(settings, embedder))
    else:
        opened = opened_backend(backend_name, settings)
    with opened as backend:
        reranker = load_reranker(settings.retrieval.reranker_model)
        retriever = Retriever(backend, embedder, settings.retrieval, reranker)
        return backend_name, retriever.retrieve(text, entity_names=entities, terms=terms)


def format_retrieval(retrieval: Retrieval) -> str:
    """The cited papers, why any were withheld or added, the grounding of every term, timings."""
    lines = [f"{'#':>2}  {'PMID':<12} {'year':>4}  {'final':>8} {'rerank':>8} {'rrf':>7}  title"]
    for rank, row in enumerate(retrieval.results, 1):
        if row.get("injected"):
            scores = f"{'landscape-only keyword hit':>25}"
        else:
            scores = f"{row['final_score']:8.4f} {row['rerank_score']:8.4f} {row['rrf_score']:7.4f}"
        lines.append(
            f"{rank:>2}  {row['pmid']:<12} {row.get('year') or '':>4}  {scores}  "
            f"{row['title'][:70]}"
        )
    citations = retrieval.citations
    if citations.evidence_ungrounded:
        focus = ", ".join(retrieval.plan.focus_terms)
        lines.append(f"no paper cited: no focus term ({focus}) is written in the corpus")
    for term, grounded in retrieval.grounding.items():
        lines.append(
            f"term {term!r}: grounded in corpus={grounded['corpus']}, "
            f"in abstract={grounded['abstract']}"
        )
    timing = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in retrieval.timings.items())
    lines.append(f"timings: {timing}")
    return "\n".join(lines)
