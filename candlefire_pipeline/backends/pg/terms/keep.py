"""What a reader writes to the term cache: computed entries, use counts, eviction.

A reader keeps an entry only under the writers' advisory lock taken shared (never waiting: a
write in progress means the answer is served but not kept) and only if the table's content
version is still the one read before the answer was computed, so a kept entry always describes
the content a maintained write will find. Nothing here is needed for a correct answer: a role
that may not write, a standby, or a lock held elsewhere only means answers are not kept.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.entries import Entry
from candlefire_pipeline.backends.pg.terms.lookup import Key

log = logging.getLogger(__name__)

#: Evicting trims the cache to this share of its bound, so evictions come in batches.
EVICT_TO = 0.9
#: A use-count flush waits at most this long for a row a writer holds, then tries later.
FLUSH_LOCK_TIMEOUT = "200ms"


#: What a connection that may not write says: a read-only role or transaction, no grant, or a hot
#: standby (it refuses the SET TRANSACTION READ WRITE itself: "during recovery").
READ_ONLY_ERRORS = (
    psycopg.errors.ReadOnlySqlTransaction,
    psycopg.errors.InsufficientPrivilege,
    psycopg.errors.FeatureNotSupported,
)


class ReadOnlyCache(RuntimeError):
    """This connection may not write the cache (read-only role, standby, no grant)."""


def upsert_query(names: Names) -> sql.Composed:
    """One entry in; a list replaces the kept one, grounding facts known on either side stay."""
    return sql.SQL(
        """INSERT INTO {e} AS e (kind, recipe, model_id, text, vector, listed, ids, distances,
            complete, approximate, witness, witness_known, abstract_witness, abstract_known,
            abstract_first)
        VALUES (%s, %s, %s, %s, %b, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
        ON CONFLICT (kind, recipe, model_id, text) DO UPDATE SET
            vector = CASE WHEN EXCLUDED.listed THEN EXCLUDED.vector ELSE e.vector END,
            ids = CASE WHEN EXCLUDED.listed THEN EXCLUDED.ids ELSE e.ids END,
            distances = CASE WHEN EXCLUDED.listed THEN EXCLUDED.distances ELSE e.distances END,
            complete = CASE WHEN EXCLUDED.listed THEN EXCLUDED.complete ELSE e.complete END,
            approximate = CASE WHEN EXCLUDED.listed THEN EXCLUDED.approximate
                ELSE e.approximate END,
            listed = EXCLUDED.listed OR e.listed,
            witness = CASE WHEN EXCLUDED.witness_known THEN EXCLUDED.witness ELSE e.witness END,
            witness_known = EXCLUDED.witness_known OR e.witness_known,
            abstract_witness = CASE WHEN EXCLUDED.abstract_known THEN EXCLUDED.abstract_witness
                ELSE e.abstract_witness END,
            abstract_known = EXCLUDED.abstract_known OR e.abstract_known,
            abstract_first = coalesce(EXCLUDED.abstract_first, e.abstract_first),
            fills = e.fills + 1, used_at = now()"""
    ).format(e=schema.terms_table(names))


def keep(
    conn: psycopg.Connection,
    names: Names,
    key: Key,
    entries: Sequence[tuple[Entry, np.ndarray | None]],
    version: int,
    max_entries: int,
) -> bool:
    """Store computed entries (with the vector each was ranked by); False when not kept."""
    if not entries:
        return True
    with _writing(conn):
        if not _may_keep(conn, names, version):
            return False
        with conn.cursor() as cur:
            cur.executemany(upsert_query(names), [_params(key, e, v) for e, v in entries])
        _evict(conn, names, max_entries)
    return True


def keep_first(conn: psycopg.Connection, names: Names, key: Key, text: str, chunk_id: str,
               version: int) -> bool:  # fmt: skip
    """Keep an entry's first abstract holder (found in insertion order at `version`)."""
    query = sql.SQL(
        "UPDATE {e} SET abstract_first = %s WHERE kind = %s AND recipe = %s AND model_id = %s "
        "AND text = %s AND abstract_known AND abstract_witness IS NOT NULL"
    ).format(e=schema.terms_table(names))
    with _writing(conn):
        if not _may_keep(conn, names, version):
            return False
        params = [chunk_id, key.kind, key.recipe, key.model_id, text]
        return conn.execute(query, params).rowcount == 1


@contextmanager
def _writing(conn: psycopg.Connection) -> Iterator[None]:
    """A read-write transaction of the cache's; a connection that may not write raises
    ReadOnlyCache."""
    try:
        with conn.transaction():
            conn.execute("SET TRANSACTION READ WRITE")
            yield
    except READ_ONLY_ERRORS as exc:
        raise ReadOnlyCache(str(exc).strip().splitlines()[0]) from None


def _may_keep(conn: psycopg.Connection, names: Names, version: int) -> bool:
    locked = conn.execute(
        "SELECT pg_try_advisory_xact_lock_shared(hashtext(%s))", [names.lock_key]
    ).fetchone()[0]
    if not locked:  # a write is in progress: its upkeep cannot see what we would add
        return False
    content, cache = schema.versions(conn, names)
    return content == version and cache == content


def _params(key: Key, entry: Entry, vector: np.ndarray | None) -> list:
    return [
        key.kind, key.recipe, key.model_id, entry.text,
        None if vector is None else np.asarray(vector, dtype=np.float32),
        entry.listed, list(entry.ids), list(entry.distances), entry.complete, entry.approximate,
        entry.witness, entry.witness_known, entry.abstract_witness, entry.abstract_known,
        entry.abstract_first,
    ]  # fmt: skip


def _evict(conn: psycopg.Connection, names: Names, max_entries: int) -> None:
    terms = schema.terms_table(names)
    count = conn.execute(sql.SQL("SELECT count(*) FROM {e}").format(e=terms)).fetchone()[0]
    if count <= max_entries:
        return
    excess = count - int(max_entries * EVICT_TO)
    conn.execute(
        sql.SQL(
            "DELETE FROM {e} WHERE id IN (SELECT id FROM {e} ORDER BY used_at, id LIMIT %s)"
        ).format(e=terms),
        [excess],
    )
    log.info("term cache: %d least recently used entries evicted (bound %d)", excess, max_entries)


def flush_uses(conn: psycopg.Connection, names: Names, uses: dict[int, int]) -> bool:
    """Add these hit counts and mark the entries used now; False when it must wait."""
    if not uses:
        return True
    ids, counts = list(uses), [uses[i] for i in uses]
    query = sql.SQL(
        "UPDATE {e} AS e SET hits = e.hits + u.n, used_at = now() "
        "FROM unnest(%s::bigint[], %s::bigint[]) AS u(id, n) WHERE e.id = u.id"
    ).format(e=schema.terms_table(names))
    try:
        with _writing(conn):
            conn.execute("SELECT set_config('lock_timeout', %s, true)", [FLUSH_LOCK_TIMEOUT])
            conn.execute(query, [ids, counts])
        return True
    except psycopg.errors.LockNotAvailable:
        return False
