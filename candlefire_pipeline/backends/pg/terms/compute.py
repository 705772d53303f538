"""Computing missing term answers (the cold path): one statement per stage for every missing
text, exact where the cost is bounded, an HNSW walk where exact ranking would read a share of
the table that grows with it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from candlefire_pipeline.backends.base import Filter, ResultRow
from candlefire_pipeline.backends.pg.layout import MAX_EF_SEARCH, StageEffort
from candlefire_pipeline.backends.pg.phrase import python_query_keys
from candlefire_pipeline.backends.pg.sql import semantic_query, substring_query
from candlefire_pipeline.backends.pg.terms import cold
from candlefire_pipeline.backends.pg.terms.entries import ENTITY, KEYWORD, Entry


class ContentMoved(RuntimeError):
    """A chunk ranked by one statement was gone by the next (a write landed in between)."""


def walk_threshold(rows: int, depth: int) -> int:
    """Holders past which a keyword variant is walked: both paths then cost at most about
    sqrt(depth x rows) row visits (exact ranks every holder; a walk for `depth` matches visits
    about depth x rows / holders chunks), so a cold variant grows as the square root of the
    table, not linearly."""
    return max(depth, math.ceil(math.sqrt(depth * max(rows, 1))))


def _use_effort(store, ef: int, depth: int) -> None:
    candidates = store.layout.candidates(depth, store.ann.rerank_factor)
    effort = min(MAX_EF_SEARCH, max(ef, candidates))
    store.apply_effort(StageEffort(effort, store.ann.iterative_scan, store.ann.max_scan_tuples))


def walk(store, vectors: np.ndarray, depth: int, exact: bool, patterns=None) -> list[list]:
    """Per vector its `depth` nearest chunks as (row, distance); `patterns` filters each."""
    query, params = semantic_query(
        store.names, Filter(), list(vectors), depth, store.layout, store.model()[1],
        store.layout.candidates(depth, store.ann.rerank_factor), exact, patterns,
    )  # fmt: skip
    with store.plan(cold.WALK_PLAN if patterns and not exact else {}):
        rows = store.conn.execute(query, params).fetchall()
    lists: list[list] = [[] for _ in range(len(vectors))]
    for row in rows:
        lists[row[0] - 1].append((store.result(row[1:-1]), row[-1]))
    return lists


def entity_entries(store, ef: int, texts, vectors: np.ndarray, depth: int) -> list[Entry]:
    """Each name's `depth` nearest chunks: exact on a small table, else an HNSW walk at `ef`."""
    exact = store.exact_scan()
    if not exact:
        _use_effort(store, ef, depth)
    lists = walk(store, vectors, depth, exact)
    short = [i for i, hits in enumerate(lists) if len(hits) < depth and not exact]
    if short:  # an unfiltered walk ends short only on a table smaller than depth
        for i, hits in zip(short, walk(store, vectors[short], depth, True), strict=True):
            lists[i] = hits
    return [
        _listed(Entry(ENTITY, text), hits, approximate=not exact, complete=len(hits) < depth)
        for text, hits in zip(texts, lists, strict=True)
    ]


def keyword_entries(store, ef: int, walks: bool, variants, vectors, depth: int,
                    first_abstract: bool = False) -> list[Entry]:  # fmt: skip
    """Each variant's `depth` holders nearest its vector, its witnesses; a variant held by more
    than walk_threshold() chunks is walked (when `walks` and the table is walked at all): the
    ones the document sample shows frequent at once, the others after a probe finds them so.
    `first_abstract` (the table has `seq`): a probe that saw every holder also names the first
    abstract holder in insertion order (the app's grounding-in-an-abstract `get`), so that call
    never walks for a variant whose list was computed."""
    limit, sampled = None, [False] * len(variants)  # a small table ranks every holder
    estimates = _estimates(store, variants, walks)
    if walks and estimates is not None:
        limit = walk_threshold(store.row_estimate(), depth) + 1
        sampled = [e.frequent(limit - 1) for e in estimates]
    phrased = _phrased(estimates, len(variants))
    entries = [Entry(KEYWORD, v, listed=True) for v in variants]
    probed = [i for i, frequent in enumerate(sampled) if not frequent]
    walked = [i for i, frequent in enumerate(sampled) if frequent]
    if probed:
        routes = [phrased[i] for i in probed]
        walked += _probe(store, entries, probed, vectors, limit, depth, routes, first_abstract)
    if walked:
        _walk_keywords(store, ef, entries, sorted(walked), vectors, depth)
    return entries


def _estimates(store, variants, walks: bool) -> list | None:
    """The document sample's estimates, when a walk or the phrase index may use them (never on
    a table small enough to search exactly)."""
    phrase_ready = any(python_query_keys(v) for v in variants) and store.phrase_ready()
    if not (walks or phrase_ready) or store.exact_scan():
        return None
    return store.document_sample.estimates(
        store.conn, store.names, store.substring_mode, variants, store.row_estimate(),
        routes=phrase_ready,  # no index to route to: only the holders are counted
    )  # fmt: skip


def _phrased(estimates: list | None, n: int) -> list[bool]:
    return [False] * n if estimates is None else [e.by_phrase for e in estimates]


def _probe(store, entries, probed, vectors, limit, depth: int, routes: list[bool],
           first_abstract: bool) -> list:  # fmt: skip
    """Rank the holders of these variants exactly (up to `limit`); the ones past it to walk."""
    query, params = cold.probe_query(
        store.names, store.substring_mode, [entries[i].text for i in probed],
        [vectors[i] for i in probed], limit, depth, routes, first_abstract=first_abstract,
    )  # fmt: skip
    with store.plan(cold.PROBE_PLAN):
        rows = store.conn.execute(query, params).fetchall()
    frequent = []
    for i, (_, holders, witness, abstract, ids, distances, first) in zip(probed, rows,
                                                                          strict=True):  # fmt: skip
        whole = limit is None or holders < limit
        entries[i] = replace(
            entries[i], ids=tuple(ids), distances=tuple(distances),
            complete=whole and holders <= depth, witness=witness, witness_known=True,
            abstract_witness=abstract, abstract_known=whole or abstract is not None,
            abstract_first=first if whole else None,
        )  # fmt: skip
        if not whole:
            frequent.append(i)
    return frequent


def _walk_keywords(store, ef, entries, frequent, vectors, depth) -> None:
    """Lists of variants held by many chunks: an HNSW walk filtered by the substring; a walk
    that ends short (hnsw.max_scan_tuples) is ranked exactly instead."""
    _use_effort(store, ef, depth)
    texts = [entries[i].text for i in frequent]
    walked = walk(store, vectors[frequent], depth, False, (texts, store.substring_mode))
    for i, hits in zip(frequent, walked, strict=True):
        approximate = len(hits) >= depth
        if not approximate:
            hits = _exact_keyword(store, entries[i].text, vectors[i], depth)
        complete = not approximate and len(hits) < depth
        entry = _witnesses_from(entries[i], [row for row, _ in hits], complete)
        entries[i] = _listed(entry, hits, approximate=approximate, complete=complete)


def _witnesses_from(entry: Entry, rows: list, complete: bool) -> Entry:
    """Grounding facts from a list's rows, where the probe gave none (a sampled variant):
    every listed row holds the variant; a complete list holds every holder."""
    if entry.witness_known:
        return entry
    ids = sorted(r["chunk_id"] for r in rows)
    abstracts = sorted(r["chunk_id"] for r in rows if r["chunk_index"] == 0)
    return replace(
        entry, witness=ids[0] if ids else None, witness_known=bool(ids) or complete,
        abstract_witness=abstracts[0] if abstracts else None,
        abstract_known=bool(abstracts) or complete,
    )  # fmt: skip


def _exact_keyword(store, variant: str, vector: np.ndarray, depth: int) -> list:
    query, params = substring_query(
        store.names, [variant], store.substring_mode, Filter(), [vector], depth, store.layout
    )
    rows = store.conn.execute(query, params).fetchall()
    return [(store.result(row[1:-1]), row[-1]) for row in rows]


def _listed(entry: Entry, hits: list, approximate: bool, complete: bool) -> Entry:
    return replace(
        entry, listed=True, ids=tuple(r["chunk_id"] for r, _ in hits),
        distances=tuple(float(d) for _, d in hits), complete=complete, approximate=approximate,
    )  # fmt: skip


def result_rows(store, entries: list[Entry], n: int) -> list[list[ResultRow]]:
    """The result rows of each entry's first n members, one statement for all."""
    wanted = sorted({i for e in entries for i in e.ids[:n]})
    rows = store.rows_by_id(wanted)
    if len(rows) != len(wanted):
        raise ContentMoved(f"{len(wanted) - len(rows)} ranked chunks were deleted meanwhile")
    out = []
    for entry in entries:
        pairs = zip(entry.ids[:n], entry.distances[:n], strict=True)
        out.append([{**rows[i], "similarity": 1.0 - d} for i, d in pairs])
    return out


def grounding_entries(store, variants: list[str]) -> list[Entry]:
    """Each variant's witnesses (no list): one statement for all."""
    phrased = _phrased(_estimates(store, variants, walks=False), len(variants))
    query, params = cold.grounding_query(store.names, store.substring_mode, variants, phrased)
    with store.plan(cold.PROBE_PLAN):
        rows = store.conn.execute(query, params).fetchall()
    return [
        Entry(KEYWORD, v, witness=w, witness_known=True, abstract_witness=a, abstract_known=True)
        for (_, w, a), v in zip(rows, variants, strict=True)
    ]
