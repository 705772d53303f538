"""The generations benchmark's workload: the retrieval workload's chunks written as ingested
drops, and a process that keeps querying the serving generation (idle, then while another one
builds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks.common.corpus import entity_pool, synthetic_corpus
from benchmarks.common.data import scifact_queries, scifact_records
from benchmarks.common.requests import Request, make_requests, timed_answers
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA, DELETED_SCHEMA, PAPER_SCHEMA


def write_drops(batches_dir: Path, size: int, drops: int) -> tuple[list[str], list[Request]]:
    """`size` chunks of the synthetic corpus (SciFact text, ~1,000 characters each) as `drops`
    ingested drops (papers, deleted and chunks files); the latency requests over them."""
    records = scifact_records()
    # the vectors of the synthetic corpus are not used: every generation embeds the text itself
    corpus = synthetic_corpus(records, np.zeros((len(records), 8), dtype=np.float32))
    chunks = corpus.chunks[:size]
    pmids = list(dict.fromkeys(c["pmid"] for c in chunks))
    per_drop = -(-len(pmids) // drops)
    keys = []
    for number in range(drops):
        mine = set(pmids[number * per_drop : (number + 1) * per_drop])
        if not mine:
            break
        key = f"bench-{number + 1:04d}"
        _write_drop(batches_dir / key, [c for c in chunks if c["pmid"] in mine])
        keys.append(key)
    texts = [q.text for q in scifact_queries()]
    requests = make_requests(texts, entity_pool([r["title"] for r in records]), corpus)
    return keys, requests


def _write_drop(folder: Path, chunks: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    first = {c["pmid"]: c for c in reversed(chunks)}  # each paper's chunk 0
    papers = [
        {"pmid": pmid, "title": c["title"], "abstract": c["document"], "year": c["year"],
         "doi": "", "citation_count": c["citation_count"], "paper_hash": c["paper_hash"]}
        for pmid, c in first.items()
    ]  # fmt: skip
    pq.write_table(pa.Table.from_pylist(papers, schema=PAPER_SCHEMA), folder / "papers.parquet")
    pq.write_table(pa.Table.from_pylist([], schema=DELETED_SCHEMA), folder / "deleted.parquet")
    pq.write_table(pa.Table.from_pylist(chunks, schema=CHUNK_SCHEMA), folder / "chunks.parquet")


def serve(settings, requests: list[Request], idle: int, results, stop) -> None:
    """In its own process: `idle` requests, ("idle", seconds) sent; then requests until `stop`,
    ("building", seconds) sent. Full retrieve() on the serving generation's pgvector."""
    from candlefire_pipeline.backends.factory import open_backend
    from candlefire_pipeline.embedding import embedder_for
    from candlefire_pipeline.retrieval.retriever import Retriever

    backend = open_backend("pgvector", settings)
    retriever = Retriever(backend, embedder_for(settings, "query"), settings.retrieval)
    for request in requests[:3]:  # connection and first-call costs
        retriever.retrieve(request.query, request.entities, request.terms)
    results.put(("idle", timed_answers(retriever, requests[:idle], warmup=0)[1]))
    seconds, position = [], idle
    while not stop.is_set():
        request = requests[position % len(requests)]
        seconds += timed_answers(retriever, [request], warmup=0)[1]
        position += 1
    results.put(("building", seconds))
    backend.close()
