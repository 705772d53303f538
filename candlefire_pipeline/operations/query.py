"""`candlefire query`: the full retriever on one backend, formatted for a terminal."""

from __future__ import annotations

from contextlib import closing

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.parity import build_oracle
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.retrieval.rerank import load_reranker
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import ORACLE

SERVING = "serving"  # follow the switch, exactly as the app does (operations/reader.py)


def run_query(
    settings: Settings, backend_name: str, text: str, entities: list[str], terms: list[str]
) -> tuple[str, Retrieval]:
    """(backend used, retrieve() result) on one backend, or (backend_name "serving") on the one
    the switch names, read exactly as the app reads it."""
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


def format_retrieval(retrieval: Retrieval, terms: list[str]) -> str:
    lines = [f"{'#':>2}  {'PMID':<12} {'year':>4}  {'final':>8} {'rerank':>8} {'rrf':>7}  title"]
    for rank, row in enumerate(retrieval.results, 1):
        lines.append(
            f"{rank:>2}  {row['pmid']:<12} {row.get('year') or '':>4}  {row['final_score']:8.4f} "
            f"{row['rerank_score']:8.4f} {row['rrf_score']:7.4f}  {row['title'][:70]}"
        )
    for term in terms:
        g = retrieval.grounding[term]
        lines.append(
            f"term {term!r}: grounded in corpus={g['corpus']}, in abstract={g['abstract']}"
        )
    timing = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in retrieval.timings.items())
    lines.append(f"timings: {timing}")
    return "\n".join(lines)
