"""The request mix every retrieval-side benchmark runs, the 62k-chunk workload in memory, and
how answers are judged against an exact oracle (final and per-stage recall)."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from benchmarks.common.corpus import SyntheticCorpus, entity_pool, spelling, synthetic_corpus
from benchmarks.common.data import LATENCY_CHUNKS, scifact_queries, scifact_records
from benchmarks.common.data import embed_cached as cached
from candlefire_pipeline.corpus.schema import store_rows
from candlefire_pipeline.parity import metrics

TERM_KINDS = ("in an abstract", "body chunks only", "absent")


@dataclass(frozen=True)
class Request:
    query: str
    entities: tuple[str, ...]
    terms: tuple[str, ...]  # one per TERM_KINDS


def make_requests(
    queries: Sequence[str], pool: Sequence[str], corpus: SyntheticCorpus, seed: int = 11
) -> list[Request]:
    """Real claims as queries, 12 entity names and 3 grounding terms (one of each kind) each."""
    rng = random.Random(seed)
    kinds = (corpus.codes_in_abstracts, corpus.codes_in_bodies_only, corpus.absent_codes)
    return [
        Request(
            query=text,
            entities=tuple(rng.sample(list(pool), 12)),
            terms=tuple(spelling(rng, rng.choice(codes)) for codes in kinds),
        )
        for text in queries
    ]


@dataclass(frozen=True)
class Workload:
    rows: pa.Table
    corpus: SyntheticCorpus
    pool: list[str]

    def requests(self, n: int, seed: int = 11) -> list[Request]:
        """The first n SciFact claims as queries, each with 12 entity names and 3 terms."""
        return make_requests([q.text for q in scifact_queries()[:n]], self.pool, self.corpus, seed)


def latency_workload(embedder, size: int = LATENCY_CHUNKS) -> Workload:
    records = scifact_records()
    # real embeddings of the SciFact titles (row i = records[i]) seed the synthetic vectors
    base = cached(embedder, [r["title"] for r in records])
    corpus = synthetic_corpus(records, base, size=size)
    rows = store_rows(corpus.chunks, corpus.vectors, "synthetic", embedder.model_id)
    return Workload(rows, corpus, entity_pool([r["title"] for r in records]))


class ExactAnnOracle:
    """The exact memory backend for every ANN call; the pgvector store for the substring paths.

    Only the ANN stages differ between pgvector and exact search: its keyword fetch (trigram
    filter, then an exact sort) and grounding are exact already (their agreement with the memory
    backend is checked in the latency part). The memory backend's Python substring scan costs
    ~2 s per request at 62k chunks, which made a 200-request sweep oracle take most of an hour.
    """

    name = "exact-ann oracle"

    def __init__(self, memory, store) -> None:
        self._memory, self._store = memory, store

    def semantic_candidates(self, vectors, n, where=None, stage=None, texts=None):
        return self._memory.semantic_candidates(vectors, n, where, stage)

    def __getattr__(self, attribute: str):
        return getattr(self._store, attribute)


def final_recall(answers: Sequence, oracle_answers: Sequence) -> float:
    """Mean recall@15 of the final retrieve() PMIDs against the exact oracle's final PMIDs."""
    pairs = zip(answers, oracle_answers, strict=True)
    return float(np.mean([metrics.recall(got.pmids, ref.pmids) for got, ref in pairs]))


def list_recall(answers: Sequence, oracle_answers: Sequence, field: str) -> float:
    """Mean recall of one stage's PMID list (semantic_pmids / entity_pmids) against the oracle."""
    pairs = zip(answers, oracle_answers, strict=True)
    return float(
        np.mean([metrics.recall(getattr(got, field), getattr(ref, field)) for got, ref in pairs])
    )


def answer_all(retriever, requests: Sequence[Request]) -> list:
    return [retriever.retrieve(r.query, r.entities, r.terms) for r in requests]


def timed_answers(retriever, requests: Sequence[Request], warmup: int = 3):
    """retrieve() of every request, and its seconds each (after `warmup` untimed requests)."""
    for r in requests[:warmup]:
        retriever.retrieve(r.query, r.entities, r.terms)
    answers, seconds = [], []
    for r in requests:
        started = time.perf_counter()
        answers.append(retriever.retrieve(r.query, r.entities, r.terms))
        seconds.append(time.perf_counter() - started)
    return answers, seconds
