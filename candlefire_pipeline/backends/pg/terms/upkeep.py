"""The writer's side of the term cache: every entry kept exact in the transaction that writes
the chunks, at the cost of the drop.

After a write's DELETE and COPY, inside its transaction:
- the deleted chunk ids leave every entry that names them;
- the new chunks are matched against the kept texts (matching.py: each document read once,
  each vector compared with the kept vectors in numpy); the pairs that may enter a list get
  their exact distance from Postgres (the `<=>` a fresh query computes), and enter when they
  sort before the entry's last member (entries.py); the others may only become a witness;
- the changed entries are written back in one statement;
- the meta row's cache_version is set to the content version: readers use the cache again.

All of it but the write (`prepare`) needs none of the new rows in the table: a write runs it
beside its COPY (ahead.py) and, after the COPY, only writes what it found.

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
from typing import TYPE_CHECKING, Protocol

import numpy as np
import psycopg
from psycopg import sql

from candlefire_pipeline.backends import common
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import matching, schema
from candlefire_pipeline.backends.pg.terms.entries import (
    Candidate,
    Entry,
    with_candidates,
    without,
)
from candlefire_pipeline.backends.pg.terms.matching import Pairs

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

_STATE = (
    "id", "kind", "text", "listed", "ids", "distances", "complete", "approximate", "witness",
    "witness_known", "abstract_witness", "abstract_known", "abstract_first",
)  # fmt: skip


@dataclass
class UpkeepReport:
    """What one write did to the cache (asset metadata, benchmarks)."""

    entries: int = 0
    changed: int = 0
    pairs: int = 0
    #: what the upkeep added to the write: its own work plus any wait for the read ahead
    seconds: float = 0.0
    #: the read ahead's own time, beside the COPY (0: read inline)
    ahead_seconds: float = 0.0
    cleared: str = ""  # why the cache was cleared, if it was

    def add(self, other: UpkeepReport) -> None:
        """Sum another write's upkeep into this one (the step's totals)."""
        self.entries += other.entries
        self.changed += other.changed
        self.pairs += other.pairs
        self.seconds += other.seconds
        self.ahead_seconds += other.ahead_seconds
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
    ahead: Ahead | None = None,
) -> UpkeepReport:
    """Keep every entry exact after this transaction's deletes and inserts, then validate.

    `ahead` is what read these same deletes and rows beside the COPY (ahead.py), if anything."""
    started, report = time.perf_counter(), UpkeepReport()
    try:
        with conn.transaction():  # a savepoint: a failure undoes the upkeep only
            prepared = ahead.result() if ahead is not None else None
            report.ahead_seconds = ahead.seconds if ahead is not None else 0.0
            _maintain(conn, names, set(deleted), added, cap, report, prepared)
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


@dataclass(frozen=True)
class Prepared:
    """The upkeep up to its write: the entries it changes, and what it looked at."""

    changed: list[Entry]
    entries: int = 0
    pairs: int = 0


class Ahead(Protocol):
    """A `prepare` running elsewhere (ahead.ReadAhead); result() None: read inline instead."""

    seconds: float

    def result(self) -> Prepared | None: ...


def prepare(
    conn: psycopg.Connection,
    names: Names,
    deleted: Sequence[str],
    added: pa.Table | None,
    cap: int,
) -> Prepared:
    """Every entry these deletes and new rows change, as it must be written: read from the
    cache's table only (the new rows' distances from their own vectors, never from the chunk
    table), so it can run before the rows are in it."""
    adds = added is not None and added.num_rows > 0
    if not adds and not deleted:
        return Prepared([])
    dim = common.rows_dim(added) if adds else None
    kept = matching.read_kept(conn, names, sorted(set(deleted)), dim)
    pairs = Pairs.none()
    if adds:
        pairs = matching.find_pairs(
            kept,
            added,
            lambda at: matching.read_vectors(conn, names, kept.ids[at], dim),
            carried=_carried(added, deleted),
        )
    wanted = set(pairs.entries.tolist()) | set(kept.ids[kept.touched].tolist())
    entries = _entries(conn, names, sorted(wanted))
    gone = set(deleted)
    candidates = _candidates(conn, names, pairs, added, gone) if entries else {}
    changed = []
    for entry in entries:
        kept_entry = with_candidates(without(entry, gone), candidates.get(entry.id, ()), cap)
        if kept_entry != entry:
            changed.append(kept_entry)
    return Prepared(changed, entries=len(entries), pairs=len(pairs))


def _maintain(conn, names, deleted, added, cap, report, prepared: Prepared | None) -> None:
    prepared = prepared or prepare(conn, names, deleted, added, cap)
    report.pairs, report.entries, report.changed = (
        prepared.pairs, prepared.entries, len(prepared.changed)
    )  # fmt: skip
    _write(conn, names, prepared.changed)


def _entries(conn, names: Names, entry_ids: list[int]) -> list[Entry]:
    if not entry_ids:
        return []
    query = sql.SQL("SELECT {cols} FROM {e} e WHERE e.id = ANY(%s)").format(
        cols=sql.SQL(", ").join(sql.Identifier("e", c) for c in _STATE),
        e=schema.terms_table(names),
    )
    return [_entry(row) for row in conn.execute(query, [entry_ids])]


def _entry(row: tuple) -> Entry:
    values = dict(zip(_STATE, row, strict=True))
    values["ids"], values["distances"] = tuple(values["ids"]), tuple(values["distances"])
    return Entry(**values)


def _carried(added: pa.Table, deleted: Sequence[str]) -> np.ndarray:
    """Per new row: this write deleted its id too (it takes its old seq back)."""
    gone = set(deleted)
    ids = added["chunk_id"].to_pylist()
    return np.fromiter((i in gone for i in ids), dtype=bool, count=len(ids))


def _candidates(conn, names, pairs: Pairs, added, gone: set[str]) -> dict[int, list[Candidate]]:
    """Each pair as a candidate: its exact distance when near (a listed entry's list may take
    it), whether its chunk is an abstract, whether this write deleted it first."""
    if not len(pairs):
        return {}
    chunk_ids = np.asarray(added["chunk_id"].to_pylist(), dtype=object)
    abstract = added["chunk_index"].to_numpy(zero_copy_only=False) == 0
    distance = _near_distances(conn, names, pairs, common.embedding_matrix(added))
    out: dict[int, list[Candidate]] = defaultdict(list)
    for entry_id, row in zip(pairs.entries.tolist(), pairs.rows.tolist(), strict=True):
        chunk_id = chunk_ids[row]
        out[entry_id].append(Candidate(chunk_id, distance.get((entry_id, row)),
                                       bool(abstract[row]), chunk_id in gone))  # fmt: skip
    return out


#: New rows whose vectors go in one statement (~6 MB of parameter at 384 dims).
DISTANCE_ROWS = 4096


def _near_distances(conn, names, pairs: Pairs, matrix: np.ndarray) -> dict:
    """(entry id, row) -> Postgres's `<=>` between the entry's vector and the row's float32
    vector sent as a parameter: the values the COPY stores (copy.py), so the same function on
    the same values as a fresh query over the stored row, bit for bit."""
    near = np.flatnonzero(pairs.near)
    rows = np.unique(pairs.rows[near])
    query = sql.SQL(
        "WITH p AS (SELECT * FROM unnest(%s::bigint[], %s::int[]) AS p(entry, row)), "
        "v AS (SELECT * FROM unnest(%s::int[], %s::vector[]) AS v(row, embedding)), "
        "e AS MATERIALIZED (SELECT id, vector FROM {e} WHERE id IN (SELECT entry FROM p)) "
        "SELECT p.entry, p.row, v.embedding <=> e.vector "
        "FROM p JOIN e ON e.id = p.entry JOIN v ON v.row = p.row"
    ).format(e=schema.terms_table(names))  # each entry read once, joined to the pairs by hash
    matching.register_vector_array(conn)
    distance = {}
    for start in range(0, len(rows), DISTANCE_ROWS):
        block = rows[start : start + DISTANCE_ROWS]
        these = near[np.isin(pairs.rows[near], block)]
        params = [pairs.entries[these].tolist(), pairs.rows[these].tolist(), block.tolist(),
                  matching.VectorArray(conn, matrix[block])]  # fmt: skip
        distance.update({(e, r): d for e, r, d in conn.execute(query, params)})
    return distance


#: The columns a write changes, with their types (binary COPY into a transaction's own table).
_WRITTEN = (
    ("id", "bigint"), ("ids", "text[]"), ("distances", "float8[]"), ("complete", "boolean"),
    ("witness", "text"), ("witness_known", "boolean"), ("abstract_witness", "text"),
    ("abstract_known", "boolean"), ("abstract_first", "text"),
)  # fmt: skip
_WRITES = sql.Identifier("candlefire_term_writes")


def _write(conn, names: Names, entries: Sequence[Entry]) -> None:
    """The changed entries, by binary COPY into a temporary table, then one UPDATE.

    Lists of any length, and distances as their float8 bytes: the JSON document this replaced
    spent ~90 ms of a 1% drop encoding and parsing 2,200 entries' decimal floats."""
    if not entries:
        return
    columns = sql.SQL(", ").join(sql.Identifier(c) for c, _ in _WRITTEN)
    conn.execute(
        sql.SQL("CREATE TEMPORARY TABLE {w} ({defs}) ON COMMIT DROP").format(
            w=_WRITES,
            defs=sql.SQL(", ").join(sql.SQL(f"{c} {t}") for c, t in _WRITTEN),
        )
    )
    copy_in = sql.SQL("COPY {w} ({c}) FROM STDIN (FORMAT BINARY)").format(w=_WRITES, c=columns)
    with conn.cursor() as cur, cur.copy(copy_in) as copy:
        copy.set_types([t for _, t in _WRITTEN])
        for e in entries:
            copy.write_row((e.id, list(e.ids), list(e.distances), e.complete, e.witness,
                            e.witness_known, e.abstract_witness, e.abstract_known,
                            e.abstract_first))  # fmt: skip
    conn.execute(
        sql.SQL("UPDATE {e} e SET {sets} FROM {w} x WHERE e.id = x.id").format(
            e=schema.terms_table(names),
            w=_WRITES,
            sets=sql.SQL(", ").join(
                sql.SQL("{c} = x.{c}").format(c=sql.Identifier(c)) for c, _ in _WRITTEN[1:]
            ),
        )
    )
    conn.execute(sql.SQL("DROP TABLE {w}").format(w=_WRITES))
