"""Recall and fan-out together: the per-stage ANN effort that keeps final recall@15 >= 0.99 on
every HNSW graph built, and what the entity fan-out then costs beside the semantic query.

The 62,196-chunk workload is first-built (the product's bulk path) three times, the rows COPYed
in three different orders, so each build has its own HNSW graph. On each graph the semantic and
the entity stage's hnsw.ef_search are swept (one varies, the other at the top of its range):
recall@15 of the final retrieve() list and of each stage's list against the exact oracle (numpy
cosine over the same vectors), stage latency with memoized embeddings. The chosen effort of a
stage is the smallest that clears the target on every build; the pair is then confirmed on each
build, and the fan-out measured with it (retrieval/fanout.py).
"""

from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np
import pyarrow as pa

from benchmarks.common.data import bench_dir
from benchmarks.common.figures import ms
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.requests import answer_all, final_recall, list_recall
from benchmarks.common.scaled.corpus import build_corpus
from benchmarks.common.stores import embedded_postgres, load
from benchmarks.retrieval.fanout import fan_out, fan_out_lines
from benchmarks.scale.queries import oracle_answers
from candlefire_pipeline.backends.factory import build_backend, pg_ann_params
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
SEMANTIC_EFS = (40, 100, 200, 400)
ENTITY_EFS = (20, 40, 60, 100, 200, 400)
TARGET = 0.99
#: A chosen effort must clear the target by this much on the sweep's own requests.
MARGIN = 0.003


def build_orders(dsn: str, corpus, builds: int) -> list:
    """One pgvector table per insertion order (order 0: as generated), first-built like the
    product's bulk load; reused when a previous run left it complete."""
    rows = pa.concat_tables(list(corpus.slices()))
    stores = []
    for order in range(builds):
        perm = np.arange(rows.num_rows)
        if order:
            np.random.default_rng(order).shuffle(perm)
        store = build_backend("pgvector", dsn, table=f"effort_{corpus.size}_order{order}")
        seconds = load(store, rows.take(pa.array(perm)), corpus.model_id, corpus.dim)
        log.info("build %d: %.0f s", order, seconds)
        stores.append(store)
    return stores


class SubstringMemo:
    """A store whose substring calls (keyword fetch, grounding) are answered once per argument
    set and shared by every point of the sweep: they are exact, do not walk the HNSW graph and
    return the same rows on every build, while the sweep times and judges the ANN stages."""

    def __init__(self, store, memo: dict) -> None:
        self._store, self._memo = store, memo

    def substring_candidates(self, variants, vectors, n, where=None):
        key = ("keyword", tuple(variants), n, where)
        if key not in self._memo:
            self._memo[key] = self._store.substring_candidates(variants, vectors, n, where)
        return self._memo[key]

    def ground_terms(self, terms):
        key = ("ground", tuple(tuple(t) for t in terms))
        if key not in self._memo:
            self._memo[key] = self._store.ground_terms(terms)
        return self._memo[key]

    def contains(self, variants, where=None):
        key = ("contains", tuple(variants), where)
        if key not in self._memo:
            self._memo[key] = self._store.contains(variants, where)
        return self._memo[key]

    def __getattr__(self, attribute: str):
        return getattr(self._store, attribute)


#: Substring answers shared by every point (see SubstringMemo).
SUBSTRINGS: dict = {}


def point(dsn: str, table: str, ann, embedder, requests, oracle) -> dict:
    store = build_backend("pgvector", dsn, table=table, ann=ann)
    retriever = Retriever(SubstringMemo(store, SUBSTRINGS), embedder)
    answer_all(retriever, requests[:3])
    answers = answer_all(retriever, requests)
    store.close()
    return {
        "ef": (ann.ef_search, ann.ef_search_entities),
        "final": final_recall(answers, oracle),
        "semantic": list_recall(answers, oracle, "semantic_pmids"),
        "entities": list_recall(answers, oracle, "entity_pmids"),
        "semantic_s": [a.timings["semantic"] for a in answers],
        "entities_s": [a.timings["entities"] for a in answers],
    }


def sweep(dsn, tables, base, embedder, requests, oracle) -> dict[str, list[dict]]:
    top = replace(base, ef_search=max(SEMANTIC_EFS), ef_search_entities=max(ENTITY_EFS))
    out: dict[str, list[dict]] = {"semantic": [], "entities": []}
    for build, table in enumerate(tables):
        for ef in SEMANTIC_EFS:
            p = point(dsn, table, replace(top, ef_search=ef), embedder, requests, oracle)
            out["semantic"].append({**p, "build": build})
        for ef in ENTITY_EFS:
            p = point(dsn, table, replace(top, ef_search_entities=ef), embedder, requests, oracle)
            out["entities"].append({**p, "build": build})
        log.info("build %d swept", build)
    return out


def smallest(points: list[dict], stage: str, builds: int) -> int:
    """The smallest ef of `stage` whose final recall clears TARGET + MARGIN on every build."""
    index = 0 if stage == "semantic" else 1
    efs = sorted({p["ef"][index] for p in points})
    for ef in efs:
        at = [p for p in points if p["ef"][index] == ef]
        if len(at) == builds and min(p["final"] for p in at) >= TARGET + MARGIN:
            return ef
    return efs[-1]


def sweep_lines(points: dict[str, list[dict]]) -> list[str]:
    lines = [
        "| build | stage varied | ef_search | final recall@15 | semantic list | entity list |"
        " semantic p50 / p95 ms | entities p50 / p95 ms |",
        "|---:|---|---:|---:|---:|---:|---|---|",
    ]
    for stage, rows in points.items():
        for p in rows:
            ef = p["ef"][0 if stage == "semantic" else 1]
            lines.append(
                f"| {p['build']} | {stage} | {ef} | {p['final']:.4f} | {p['semantic']:.4f} |"
                f" {p['entities']:.4f} | {ms(p['semantic_s'])} | {ms(p['entities_s'])} |"
            )
    return lines


def run(args, out) -> None:
    settings = Settings.from_env()
    embedder, base = embedder_for(settings, "query"), pg_ann_params(settings)
    memo = MemoEmbedder(embedder)
    monitor = LoadMonitor(markers=[bench_dir()]).start()
    with embedded_postgres() as dsn:
        corpus = build_corpus(embedder, args.size)
        stores = build_orders(dsn, corpus, args.builds)
        tables = [s.names.table for s in stores]
        requests = corpus.requests(args.requests)
        oracle = oracle_answers(corpus, stores[0], memo, requests)
        points = sweep(dsn, tables, base, memo, requests, oracle)
        chosen = replace(
            base,
            ef_search=smallest(points["semantic"], "semantic", args.builds),
            ef_search_entities=smallest(points["entities"], "entities", args.builds),
        )
        confirmed = [point(dsn, t, chosen, memo, requests, oracle) for t in tables]
        store = build_backend("pgvector", dsn, table=tables[0], ann=chosen)
        fan = {n: fan_out(store, embedder, requests[: args.fan_out_requests], n) for n in (4096, 0)}
        for s in (store, *stores):
            s.close()
    lines = [
        "## Recall and fan-out together (per-stage effort on three builds)",
        "",
        f"{args.size:,} chunks (the retrieval workload) first-built {args.builds} times with"
        " the rows in different orders (order 0 as generated, then two shuffles): each build its"
        f" own HNSW graph (m {Settings.hnsw_m} / ef_construction"
        f" {Settings.hnsw_ef_construction}). {len(requests)} full `retrieve()` requests"
        " per point, embeddings memoized (store time); recall@15 against the exact oracle (numpy"
        " cosine over the same vectors; the exact substring calls are answered once and shared,"
        " so the sweep spends its time on the ANN stages). One stage's ef_search varies, the"
        " other at"
        f" {max(SEMANTIC_EFS)} / {max(ENTITY_EFS)}.",
        "",
        *sweep_lines(points),
        "",
        f"Chosen (smallest ef_search whose final recall@15 >= {TARGET + MARGIN:.3f} on every"
        f" build): semantic **{chosen.ef_search}**, entities **{chosen.ef_search_entities}**."
        " Together, per build: "
        + "; ".join(
            f"build {i}: final recall@15 **{p['final']:.4f}** (semantic list {p['semantic']:.4f},"
            f" entity list {p['entities']:.4f}; entities {ms(p['entities_s'])} ms)"
            for i, p in enumerate(confirmed)
        )
        + f". Goal >= {TARGET} on every build:"
        f" **{'met' if min(p['final'] for p in confirmed) >= TARGET else 'NOT met'}**.",
        "",
        *fan_out_lines(fan[4096], fan[0], chosen),
        "",
        monitor.stop().note(),
    ]
    out.section("effort", "\n".join(lines))
