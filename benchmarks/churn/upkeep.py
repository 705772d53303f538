"""Term cache upkeep: what keeping 10,000 texts exact costs a drop.

The 62k retrieval workload in two pgvector tables with the same content: one keeps --texts
texts in its term cache (half entity names: SciFact title heads and the entity pool; half
keyword variants: the corpus's codes in every spelling and words of the abstracts, rare to
everywhere), the other keeps nothing (the baseline, side by side). Then drops replacing 1%, 5%
and 20% of the papers (the churn soak's revisions) through `replace_papers` on both: the apply
seconds, the upkeep's seconds inside the cached table's apply (its own timer), the entries it
touched; after each drop the cache is audited (a sample of entries against a fresh
computation).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from dataclasses import dataclass

from benchmarks.churn.revisions import Reviser
from benchmarks.churn.soak import fill
from benchmarks.common.corpus import entity_pool
from benchmarks.common.data import bench_dir, embed_cached, scifact_records
from benchmarks.common.figures import MB
from benchmarks.common.machine_load import LoadMonitor
from benchmarks.common.requests import latency_workload
from benchmarks.common.stores import embedded_postgres
from candlefire_pipeline.backends.pg.terms.audit import audit
from candlefire_pipeline.backends.pg.terms.summary import summarize
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.retrieval.variants import term_variants
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
#: A request reads 18 rows per text: the cache is filled the way requests fill it.
ROWS = 18
BATCH = 200
AUDITED = 300
_WORD = re.compile(r"[A-Za-z][A-Za-z-]{3,}")


def kept_texts(corpus, records: list[dict], count: int) -> tuple[list[str], list[str]]:
    """`count` texts, half entity names and half keyword variants (no overlap)."""
    names = list(dict.fromkeys([*entity_pool([r["title"] for r in records]),
                                *(" ".join(r["title"].split()[:k]).strip(".,:;")
                                  for k in (3, 2) for r in records)]))  # fmt: skip
    codes = [v for c in corpus.codes_in_abstracts + corpus.codes_in_bodies_only
             + corpus.absent_codes for v in term_variants(c)]  # fmt: skip
    words = Counter(w for r in records for w in _WORD.findall(r["abstract"]))
    ranked = [w for w, _ in words.most_common()]
    # words from everywhere (the most common) to rare, evenly spread over the frequency ranks
    spread = ranked[:: max(1, len(ranked) // max(1, count // 2))]
    variants = list(dict.fromkeys([*codes, *spread]))
    half = count // 2
    names = [n for n in names if n not in set(variants)]
    if len(names) < half or len(variants) < count - half:
        raise SystemExit(f"the workload yields {len(names)} names and {len(variants)} variants")
    return names[:half], variants[: count - half]


def fill_cache(store, embedder, names: list[str], variants: list[str]) -> float:
    started = time.perf_counter()
    for i in range(0, len(names), BATCH):
        part = names[i : i + BATCH]
        store.semantic_candidates(embed_cached(embedder, part), ROWS, stage="entities", texts=part)
    for i in range(0, len(variants), BATCH):
        part = variants[i : i + BATCH]
        store.substring_candidates(part, embed_cached(embedder, part), ROWS)
    return time.perf_counter() - started


def one_drop(number: int, share: float, reviser, stores: dict, model_id: str) -> dict:
    rows, _ = reviser.drop(number, share, model_id)
    out: dict = {"share": share, "rows": rows.num_rows}
    for name, store in stores.items():  # the baseline first, then the cached table
        started = time.perf_counter()
        store.replace_papers(rows)
        out[f"{name}_s"] = time.perf_counter() - started
    upkeep = stores["cached"].last_upkeep
    out |= {"upkeep_s": upkeep.seconds, "ahead_s": upkeep.ahead_seconds,
            "touched": upkeep.entries, "changed": upkeep.changed,
            "cleared": upkeep.cleared}  # fmt: skip
    checked = audit(stores["cached"], sample=AUDITED, seed=number)
    out |= {"audited": checked.checked, "differences": len(checked.differences),
            "walked_recall": checked.walked_recall}  # fmt: skip
    log.info("drop %d (%.0f%%): %s", number, share * 100, out)
    return out


def markdown(figures: dict, args, note: str) -> str:
    cache = figures["cache"]
    lines = [
        "## Term cache upkeep",
        "",
        f"The retrieval workload ({figures['rows']:,} chunks) in two pgvector tables, one keeping"
        f" {figures['names']:,} entity names and {figures['variants']:,} keyword variants in its"
        f" term cache ({cache['entries']:,} entries, {cache['bytes'] / MB:.1f} MB; filled in"
        f" {figures['fill_s']:.0f} s as requests fill it, 18 rows each), the other keeping"
        " nothing. Each drop replaces a share of the papers (new vectors and text) through"
        " `replace_papers` on both, the uncached table first; `upkeep` is the cache's own timer"
        " inside the cached apply: what the write waited for after its COPY (the write-back, and"
        " any wait for the part run beside the COPY on a connection of its own, whose own seconds"
        f" are `beside the COPY`); after each drop {AUDITED} random entries are audited against"
        " a fresh computation.",
        "",
        "| drop | rows | apply s, no cache | apply s, cached | upkeep s | upkeep / apply |"
        " beside the COPY s | cached / uncached | entries touched / changed |"
        " audited: not exact, walked recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for d in figures["drops"]:
        lines.append(
            f"| {d['share']:.0%} | {d['rows']:,} | {d['baseline_s']:.2f} | {d['cached_s']:.2f} |"
            f" {d['upkeep_s']:.3f} | **{d['upkeep_s'] / d['cached_s']:.1%}** |"
            f" {d['ahead_s']:.3f} | {d['cached_s'] / d['baseline_s']:.2f}x |"
            f" {d['touched']:,} / {d['changed']:,} |"
            f" {d['differences']} of {d['audited']}, {d['walked_recall']:.3f} |"
        )
    worst = max(d["upkeep_s"] / d["cached_s"] for d in figures["drops"])
    lines += [
        "",
        f"Goal: upkeep <= 10% of the drop's apply time with {args.texts:,} kept texts: largest"
        f" share **{worst:.1%}** ({'met' if worst <= 0.10 else 'NOT met'}).",
        "",
        note,
    ]
    return "\n".join(lines)


@dataclass
class Setup:
    """The 62k workload as revisable rows, and `texts` texts of it (names, variants)."""

    embedder: object
    reviser: Reviser
    names: list[str]
    variants: list[str]
    rows: object


def setup(size: int, texts: int) -> Setup:
    embedder = embedder_for(Settings.from_env(), "query")
    records = scifact_records()
    work = latency_workload(embedder, size)
    reviser = Reviser(work.corpus, records, embed_cached(embedder, [r["title"] for r in records]))
    names, variants = kept_texts(work.corpus, records, texts)
    return Setup(embedder, reviser, names, variants, reviser.rows(embedder.model_id))


def run(args, out) -> None:
    monitor = LoadMonitor(markers=[bench_dir()]).start()
    made = setup(args.size, args.texts)
    embedder, reviser, names, variants, rows = (
        made.embedder, made.reviser, made.names, made.variants, made.rows
    )  # fmt: skip
    with embedded_postgres() as dsn:
        stores = {name: fill(dsn, f"upkeep_{name}", rows, embedder.model_id, embedder.dim)
                  for name in ("baseline", "cached")}  # fmt: skip
        stores["baseline"].clear_term_cache("the baseline keeps nothing")
        fill_s = fill_cache(stores["cached"], embedder, names, variants)
        drops = [one_drop(i + 1, share, reviser, stores, embedder.model_id)
                 for i, share in enumerate(args.shares)]  # fmt: skip
        found = summarize(stores["cached"].conn, stores["cached"].names)
        for store in stores.values():
            store.reset()
            store.close()
    figures = {"rows": rows.num_rows, "names": len(names), "variants": len(variants),
               "fill_s": fill_s, "drops": drops,
               "cache": {"entries": found.entries, "bytes": found.bytes}}  # fmt: skip
    out.section("term-cache-upkeep", markdown(figures, args, monitor.stop().note()))
