"""The phrase index on the 62k workload: what it buys and what it costs, side by side.

Two pgvector tables with the same content, one with the phrase index (built as the store asset
builds it, beside serving), one without. Cold requests (12 entity names: SciFact title heads and
the entity pool, 3 keyword texts; every text new, nothing kept) run the keyword stage's cold
path on both, the arms alternating request by request: seconds per request and whether both
found the same lists. Then drops replacing a share of the papers go through `replace_papers` on
both (the table without the index first): what keeping the index costs a write.
"""

from __future__ import annotations

import logging
import statistics
import time

from benchmarks.churn.revisions import Reviser
from benchmarks.churn.soak import fill
from benchmarks.churn.upkeep import setup
from benchmarks.common.data import bench_dir, embed_cached
from benchmarks.common.figures import MB
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.stores import embedded_postgres
from candlefire_pipeline.backends.factory import build_backend, pg_ann_params
from candlefire_pipeline.backends.pg import phrase
from candlefire_pipeline.backends.pg.terms import compute
from candlefire_pipeline.backends.pg.terms.cache import CacheParams
from candlefire_pipeline.retrieval.variants import term_variants
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
NAMES, TERMS, DEPTH = 12, 3, 40
ARMS = ("trigram", "phrase")


def cold_requests(names: list[str], variants: list[str], n: int) -> list[list[str]]:
    """Each request's keyword variants: 12 names and 3 texts in every spelling, all unseen."""
    if len(names) < n * NAMES or len(variants) < n * TERMS:
        raise SystemExit(f"{n} requests need {n * NAMES} names and {n * TERMS} texts")
    out = []
    for i in range(n):
        texts = [*names[i * NAMES : (i + 1) * NAMES], *variants[i * TERMS : (i + 1) * TERMS]]
        out.append(list(dict.fromkeys(v for t in texts for v in term_variants(t))))
    return out


def keyword_stage(store, embedder, variants: list[str]) -> tuple[float, list]:
    """The cold keyword path of one request: its lists and grounding, and their seconds."""
    vectors = embed_cached(embedder, variants)
    started = time.perf_counter()
    ef = store.terms.params.fill_ef  # as the term cache computes a missing list
    entries = compute.keyword_entries(store, ef, True, variants, vectors, DEPTH)
    grounding = compute.grounding_entries(store, variants)
    seconds = time.perf_counter() - started
    found = [(e.ids, e.distances, e.witness, e.abstract_witness) for e in entries]
    return seconds, [*found, *((g.witness, g.abstract_witness) for g in grounding)]


def readers(dsn: str) -> dict:
    """A reader per table that keeps nothing (every request cold)."""
    ann = pg_ann_params(Settings.from_env())
    fill_ef = ann.ef_search_entities
    return {arm: build_backend("pgvector", dsn, table=f"phrase_{arm}", ann=ann,
                               cache=CacheParams(enabled=False, fill_ef=fill_ef,
                                                 phrase_index=arm == "phrase"))
            for arm in ARMS}  # fmt: skip


def compare(stores: dict, embedder, requests: list[list[str]]) -> dict:
    seconds: dict[str, list[float]] = {arm: [] for arm in ARMS}
    differing = 0
    for i, variants in enumerate(requests):
        answers = {}
        for arm in ARMS if i % 2 else reversed(ARMS):  # alternate which arm goes first
            took, answers[arm] = keyword_stage(stores[arm], embedder, variants)
            seconds[arm].append(took)
        differing += answers["trigram"] != answers["phrase"]
    return {"seconds": seconds, "differing": differing, "requests": len(requests)}


def drops(tables: dict, reviser: Reviser, shares, model_id: str) -> list[dict]:
    out = []
    for number, share in enumerate(shares, start=1):
        rows, _ = reviser.drop(number, share, model_id)
        applied = {"share": share, "rows": rows.num_rows}
        for arm in ARMS:
            started = time.perf_counter()
            tables[arm].replace_papers(rows)
            applied[arm] = time.perf_counter() - started
        log.info("drop %d: %s", number, applied)
        out.append(applied)
    return out


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1e3


def markdown(figures: dict, note: str) -> str:
    probe, built = figures["probe"], figures["build"]
    lines = [
        "## Phrase index",
        "",
        f"The retrieval workload ({figures['rows']:,} chunks) in two pgvector tables, one with"
        " the phrase index (`backends/pg/phrase.py`), one without. Built beside serving in"
        f" **{built['seconds']:.1f} s**: {built['phrase_bytes'] / MB:.0f} MB (the trigram GIN:"
        f" {built['trigram_bytes'] / MB:.0f} MB). {probe['requests']} cold requests (12 entity"
        " names, title heads and the entity pool, and 3 keyword texts in every spelling; nothing"
        " kept) run the keyword stage's cold path (lists and grounding) on both, the arms"
        " alternating:",
        "",
        "| keyword stage, cold | p50 ms | p95 ms | max ms |",
        "|---|---:|---:|---:|",
    ]
    for arm in ARMS:
        values = probe["seconds"][arm]
        label = "trigram index alone" if arm == "trigram" else "routed (phrase or trigram)"
        lines.append(f"| {label} | {_p(values, 0.5):.1f} | {_p(values, 0.95):.1f} |"
                     f" {max(values) * 1e3:.1f} |")  # fmt: skip
    ratio = statistics.median(probe["seconds"]["trigram"]) / statistics.median(
        probe["seconds"]["phrase"]
    )
    lines += [
        "",
        f"Routed / alone: **{ratio:.2f}x** faster at p50; requests whose lists or grounding"
        f" differ: **{probe['differing']} of {probe['requests']}**.",
        "",
        "What keeping it costs a write (`replace_papers` of each drop on both tables):",
        "",
        "| drop | rows | apply s, without | apply s, with | with / without |",
        "|---|---:|---:|---:|---:|",
    ]
    for d in figures["drops"]:
        lines.append(f"| {d['share']:.0%} | {d['rows']:,} | {d['trigram']:.2f} |"
                     f" {d['phrase']:.2f} | {d['phrase'] / d['trigram']:.2f}x |")  # fmt: skip
    lines += ["", note]
    return "\n".join(lines)


def run(args, out) -> None:
    monitor = LoadMonitor(markers=[bench_dir()]).start()
    made = setup(args.size, 2 * args.requests * NAMES)
    embedder, reviser, rows = made.embedder, made.reviser, made.rows
    names, variants = made.names, made.variants
    with embedded_postgres() as dsn:
        tables = {arm: fill(dsn, f"phrase_{arm}", rows, embedder.model_id, embedder.dim)
                  for arm in ARMS}  # fmt: skip
        with_index = tables["phrase"]
        built = {"seconds": with_index.build_phrase_index()}
        for label, ident in (("phrase", phrase.index_name(with_index.names, "like")),
                             ("trigram", with_index.names.trgm)):  # fmt: skip
            built[f"{label}_bytes"] = with_index.conn.execute(
                "SELECT pg_relation_size(%s::regclass)", [ident.as_string(with_index.conn)]
            ).fetchone()[0]
        stores = readers(dsn)
        probe = compare(stores, embedder, cold_requests(names, variants, args.requests))
        applied = drops(tables, reviser, args.shares, embedder.model_id)
        for store in stores.values():
            store.close()
        for table in tables.values():
            table.reset()
            table.close()
    figures = {"rows": rows.num_rows, "build": built, "probe": probe, "drops": applied}
    out.section("phrase-index", markdown(figures, monitor.stop().note()))
