"""The writer's side of the term cache: every entry kept exact in the transaction that writes
the chunks, at the cost of the drop.

After a write's DELETE and COPY, inside its transaction:
- the deleted chunk ids leave every entry that names them (the members index finds those);
- the new chunks are matched against the kept keyword variants with one Aho-Corasick pass over
  their documents (each document read once, whatever the number of variants), and compared with
  the kept entity vectors in one matrix product (blocks of rows); the pairs that may enter an
  entry get their exact distance from Postgres (the `<=>` a fresh query computes), and enter
  when they sort before the entry's last member (entries.py);
- the meta row's cache_version is set to the content version: readers use the cache again.

A cache found out of date when the write starts (the table was written without upkeep) is
cleared first; an upkeep that fails clears the cache instead of failing the write. Either is
logged at WARNING with the reason.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import ahocorasick
import numpy as np
import psycopg
import pyarrow as pa
from psycopg import sql

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.entries import (
    ENTITY,
    KEYWORD,
    Candidate,
    Entry,
    with_candidates,
    without,
)

log = logging.getLogger(__name__)

#: New rows compared with the entity vectors per matrix product (bounds its memory).
BLOCK_ROWS = 4096
#: A pair enters the exact check when numpy's float32 cosine puts it this close to the entry's
#: last member: float32 sums in another order differ by ~1e-7, pgvector's from numpy's too.
MARGIN = 1e-4

_STATE = (
    "id", "kind", "text", "listed", "ids", "distances", "complete", "approximate", "witness",
    "witness_known", "abstract_witness", "abstract_known",
)  # fmt: skip


@dataclass
class UpkeepReport:
    """What one write did to the cache (asset metadata, benchmarks)."""

    entries: int = 0
    changed: int = 0
    pairs: int = 0
    seconds: float = 0.0
    cleared: str = ""  # why the cache was cleared, if it was

    def add(self, other: UpkeepReport) -> None:
        """Sum another write's upkeep into this one (the step's totals)."""
        self.entries += other.entries
        self.changed += other.changed
        self.pairs += other.pairs
        self.seconds += other.seconds
        self.cleared = other.cleared or self.cleared


def begin(conn: psycopg.Connection, names: Names) -> str:
    """At the start of a write (lock held): this transaction maintains the cache; a cache the
    table has moved away from (a write that bypassed the store) is cleared first."""
    schema.maintained(conn)
    content, cache = schema.versions(conn, names)
    if content == cache:
        return ""
    dropped = schema.clear(conn, names)
    reason = "the table was written without keeping the cache"
    log.warning("term cache of %s cleared (%d entries): %s", names.table, dropped, reason)
    return reason


def maintain(
    conn: psycopg.Connection,
    names: Names,
    deleted: Sequence[str],
    added: pa.Table | None,
    cap: int,
) -> UpkeepReport:
    """Keep every entry exact after this transaction's deletes and inserts, then validate."""
    started, report = time.perf_counter(), UpkeepReport()
    try:
        with conn.transaction():  # a savepoint: a failure undoes the upkeep only
            _maintain(conn, names, set(deleted), added, cap, report)
    except Exception as exc:  # the write must land: an unkept cache is only slower
        dropped = schema.clear(conn, names)
        report.cleared = f"upkeep failed: {type(exc).__name__}: {exc}".splitlines()[0]
        log.error("term cache of %s cleared (%d entries): %s", names.table, dropped,
                  report.cleared, exc_info=True)  # fmt: skip
    schema.validate(conn, names)
    report.seconds = time.perf_counter() - started
    return report


def clear_all(conn: psycopg.Connection, names: Names, reason: str) -> UpkeepReport:
    """Forget every entry (a first build of the whole table) and validate."""
    dropped = schema.clear(conn, names)
    if dropped:
        log.info("term cache of %s cleared (%d entries): %s", names.table, dropped, reason)
    schema.validate(conn, names)
    return UpkeepReport(cleared=reason if dropped else "")


def _maintain(conn, names, deleted, added, cap, report) -> None:
    pairs: dict[int, list[str]] = defaultdict(list)
    if added is not None and added.num_rows:
        for entry_id, chunk_id in _keyword_pairs(conn, names, added):
            pairs[entry_id].append(chunk_id)
        for entry_id, chunk_id in _entity_pairs(conn, names, added):
            pairs[entry_id].append(chunk_id)
    report.pairs = sum(len(v) for v in pairs.values())
    entries = _affected(conn, names, list(pairs), sorted(deleted))
    report.entries = len(entries)
    if not entries:
        return
    candidates = _candidates(conn, names, entries, pairs, added)
    changed = []
    for entry in entries:
        kept = with_candidates(without(entry, deleted), candidates.get(entry.id, ()), cap)
        if kept != entry:
            changed.append(kept)
    _write(conn, names, changed)
    report.changed = len(changed)


def _keyword_pairs(conn, names, added: pa.Table) -> list[tuple[int, str]]:
    """(entry id, chunk id) for every kept variant a new document holds, per substring mode."""
    rows = conn.execute(
        sql.SQL("SELECT id, text, split_part(recipe, ';', 1) FROM {e} WHERE kind = %s").format(
            e=schema.terms_table(names)
        ),
        [KEYWORD],
    ).fetchall()
    by_mode: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for entry_id, text, mode in rows:
        by_mode[mode].append((entry_id, text))
    documents = added["document"].to_pylist()
    chunk_ids = added["chunk_id"].to_pylist()
    out = []
    for mode, entries in by_mode.items():
        fold = common.fold_case if mode == "ilike" else _same
        automaton = _automaton(entries, fold)
        for chunk_id, document in zip(chunk_ids, documents, strict=True):
            held = {i for _, ids in automaton.iter(fold(document)) for i in ids}
            out += [(entry_id, chunk_id) for entry_id in held]
    return out


def _same(text: str) -> str:
    return text


def _automaton(entries: list[tuple[int, str]], fold) -> ahocorasick.Automaton:
    """Variant text (folded for ILIKE) -> the ids of the entries kept under it."""
    ids_of: dict[str, list[int]] = defaultdict(list)
    for entry_id, text in entries:
        ids_of[fold(text)].append(entry_id)
    automaton = ahocorasick.Automaton()
    for text, ids in ids_of.items():
        automaton.add_word(text, ids)
    automaton.make_automaton()
    return automaton


def _entity_pairs(conn, names: Names, added: pa.Table) -> list[tuple[int, str]]:
    """(entry id, chunk id) where a new chunk may sort before the entry's last member."""
    rows = conn.execute(
        sql.SQL(
            "SELECT id, vector, complete, cardinality(ids), distances[cardinality(ids)] "
            "FROM {e} WHERE kind = %s AND listed"
        ).format(e=schema.terms_table(names)),
        [ENTITY],
    ).fetchall()
    rows = [r for r in rows if r[2] or r[3]]  # an empty incomplete list takes nobody
    if not rows:
        return []
    ids = np.asarray([r[0] for r in rows])
    vectors = common.unit_rows(np.stack([as_array(r[1]) for r in rows]))
    takes_all = np.asarray([bool(r[2]) for r in rows])
    last = np.asarray([r[4] if r[4] is not None else 0.0 for r in rows], dtype=np.float64)
    chunk_ids = added["chunk_id"].to_pylist()
    matrix = common.embedding_matrix(added)
    out = []
    for start in range(0, len(chunk_ids), BLOCK_ROWS):
        block = common.unit_rows(matrix[start : start + BLOCK_ROWS])
        distance = 1.0 - block @ vectors.T
        near = takes_all[None, :] | (distance <= last[None, :] + MARGIN)
        for row, col in zip(*np.nonzero(near), strict=True):
            out.append((int(ids[col]), chunk_ids[start + row]))
    return out


def as_array(value) -> np.ndarray:
    """A vector column's value as float32 (pgvector's binary loader gives a Vector object)."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def _affected(conn, names: Names, entry_ids: list[int], deleted: list[str]) -> list[Entry]:
    if not entry_ids and not deleted:
        return []
    query = sql.SQL("SELECT {cols} FROM {e} e WHERE e.id = ANY(%s) OR {members} && %s").format(
        cols=sql.SQL(", ").join(sql.Identifier("e", c) for c in _STATE),
        e=schema.terms_table(names),
        members=schema.members(),
    )
    rows = conn.execute(query, [entry_ids, deleted]).fetchall()
    return [_entry(row) for row in rows]


def _entry(row: tuple) -> Entry:
    values = dict(zip(_STATE, row, strict=True))
    values["ids"], values["distances"] = tuple(values["ids"]), tuple(values["distances"])
    return Entry(**values)


def _candidates(conn, names, entries, pairs, added) -> dict[int, list[Candidate]]:
    """Each pair's exact distance (for a listed entry) and whether its chunk is an abstract."""
    abstract = dict(
        zip(added["chunk_id"].to_pylist(), added["chunk_index"].to_pylist(), strict=True)
    ) if added is not None else {}  # fmt: skip
    listed = {e.id for e in entries if e.listed}
    wanted = [(i, c) for i in pairs for c in pairs[i] if i in listed]
    distance = {}
    if wanted:
        query = sql.SQL(
            "SELECT p.entry, p.chunk_id, c.embedding <=> e.vector "
            "FROM unnest(%s::bigint[], %s::text[]) AS p(entry, chunk_id) "
            "JOIN {e} e ON e.id = p.entry JOIN {t} c ON c.chunk_id = p.chunk_id"
        ).format(e=schema.terms_table(names), t=names.ident())
        rows = conn.execute(query, [[i for i, _ in wanted], [c for _, c in wanted]]).fetchall()
        distance = {(i, c): d for i, c, d in rows}
    out: dict[int, list[Candidate]] = defaultdict(list)
    for entry_id, chunk_ids in pairs.items():
        for chunk_id in chunk_ids:
            out[entry_id].append(
                Candidate(chunk_id, distance.get((entry_id, chunk_id)), abstract[chunk_id] == 0)
            )
    return out


def _write(conn, names: Names, entries: Sequence[Entry]) -> None:
    if not entries:
        return
    query = sql.SQL(
        "UPDATE {e} SET ids = %s, distances = %s, complete = %s, witness = %s, "
        "witness_known = %s, abstract_witness = %s, abstract_known = %s WHERE id = %s"
    ).format(e=schema.terms_table(names))
    params = [
        [list(e.ids), list(e.distances), e.complete, e.witness, e.witness_known,
         e.abstract_witness, e.abstract_known, e.id]
        for e in entries
    ]  # fmt: skip
    with conn.cursor() as cur:
        cur.executemany(query, params)
