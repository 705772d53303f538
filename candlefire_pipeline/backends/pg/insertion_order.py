"""The chunks table's insertion order (`seq`): the order Chroma's `get` returns rows in.

Chroma 1.5 returns `get` rows, and orders equal `query` distances, in its internal insertion
order: an upsert of an existing id keeps the row's place, a delete then an add moves it to the
end. The project's Chroma store replaces a paper by upserting its chunks and then deleting the
stale ones; the pgvector store replaces it by DELETE + COPY in one transaction. So `seq` (an
identity column) numbers rows as they are inserted, and two triggers give a replace Chroma's
rule: the rows a statement deletes leave (chunk_id, seq) in a session temp table emptied at every
commit; a row the same transaction inserts with one of those ids takes its old seq back as it is
inserted (a BEFORE row trigger: no second row version, no second index entry). A delete in one
transaction and an add in a later one moves the row to the end, as the same calls do in Chroma.
Measured here (4 runs, a busy machine): COPY of 60k 384-dim rows into the bare table (the first
build's path) was no slower with the row trigger than without it.

`ensure_insertion_order` runs in the writer's locked transaction on every write (one catalog
query once everything is there). A table from before `seq` gets the column on the writer's next
write: a rewrite under an exclusive lock that numbers the rows in their physical order (the
nearest thing to their insertion order the table still knows) and rebuilds its indexes.
"""

from __future__ import annotations

import logging

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg import bulk as pg_bulk
from candlefire_pipeline.backends.pg.ddl import seq_column, seq_index
from candlefire_pipeline.backends.pg.sql import SEQ_COLUMN, Names

log = logging.getLogger(__name__)

COLUMN = SEQ_COLUMN
#: The trigger functions (shared by every chunks table); a new body gets a new name.
CARRY, KEEP = "candlefire_seq_carry_v1", "candlefire_seq_keep_v1"
TRIGGERS = ("candlefire_seq_carry", "candlefire_seq_keep")
FUNCTIONS_LOCK = "candlefire:insertion-order-functions"

CARRY_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {CARRY}() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM gone) THEN
        RETURN NULL;
    END IF;
    IF to_regclass('pg_temp.candlefire_seq_carry') IS NULL THEN
        CREATE TEMP TABLE candlefire_seq_carry (
            relid oid NOT NULL, chunk_id text NOT NULL, seq bigint NOT NULL,
            PRIMARY KEY (relid, chunk_id)
        ) ON COMMIT DELETE ROWS;
    END IF;
    INSERT INTO pg_temp.candlefire_seq_carry (relid, chunk_id, seq)
        SELECT TG_RELID, g.chunk_id, g.seq FROM gone g
        ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$body$"""

KEEP_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {KEEP}() RETURNS trigger LANGUAGE plpgsql AS $body$
DECLARE
    carried bigint;
BEGIN
    SELECT k.seq INTO carried FROM pg_temp.candlefire_seq_carry k
        WHERE k.relid = TG_RELID AND k.chunk_id = NEW.chunk_id;
    IF carried IS NOT NULL THEN
        NEW.seq := carried;
    END IF;
    RETURN NEW;
END
$body$"""

STATE_QUERY = """
SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%(t)s)
               AND attname = %(c)s AND NOT attisdropped),
       (SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%(t)s)
        AND tgname = ANY(%(g)s)),
       (SELECT count(*) FROM pg_proc WHERE proname = ANY(%(f)s)),
       to_regclass(%(i)s) IS NOT NULL
"""


def has_insertion_order(conn: psycopg.Connection, names: Names) -> bool:
    """Whether the table has the seq column (a reader's check: it cannot add it)."""
    return bool(_state(conn, names)[0])


def has_seq_index(conn: psycopg.Connection, names: Names) -> bool:
    """Whether insertion order is indexed (the writer adds the index on its next write)."""
    return bool(_state(conn, names)[3])


def _state(conn: psycopg.Connection, names: Names) -> tuple[bool, int, int, bool]:
    table, index = names.ident().as_string(conn), names.seq_order.as_string(conn)
    row = conn.execute(
        STATE_QUERY,
        {"t": table, "c": COLUMN, "g": list(TRIGGERS), "f": [CARRY, KEEP], "i": index},
    ).fetchone()
    return bool(row[0]), int(row[1]), int(row[2]), bool(row[3])


def ensure_insertion_order(conn: psycopg.Connection, names: Names) -> None:
    """Give an existing table the seq column, its triggers and its index (in the caller's
    transaction)."""
    has_column, triggers, functions, indexed = _state(conn, names)
    if not has_column:
        _add_column(conn, names)
    if not indexed:
        log.info("%s: indexing its insertion order", names.table)
        conn.execute(seq_index(names))
    if functions < 2:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [FUNCTIONS_LOCK])
        conn.execute(CARRY_FUNCTION)
        conn.execute(KEEP_FUNCTION)
    if triggers < len(TRIGGERS):
        _create_triggers(conn, names)


def _add_column(conn: psycopg.Connection, names: Names) -> None:
    rows, dim = conn.execute(
        sql.SQL("SELECT count(*), max(vector_dims(embedding)) FROM {t}").format(t=names.ident())
    ).fetchone()
    log.warning(
        "%s: adding the insertion order column (%d rows numbered in physical order; the table "
        "is rewritten and its indexes rebuilt, under an exclusive lock)", names.table, rows
    )  # fmt: skip
    pg_bulk.use_build_resources(conn, pg_bulk.build_memory_mb(rows, dim or 1, "vector"))
    conn.execute(sql.SQL("ALTER TABLE {t} ADD COLUMN {c}").format(t=names.ident(), c=seq_column()))


def _create_triggers(conn: psycopg.Connection, names: Names) -> None:
    carry, keep = (sql.Identifier(name) for name in TRIGGERS)
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE TRIGGER {g} AFTER DELETE ON {t} REFERENCING OLD TABLE AS gone "
            "FOR EACH STATEMENT EXECUTE FUNCTION {f}()"
        ).format(g=carry, t=names.ident(), f=sql.Identifier(CARRY))
    )
    # the row trigger runs only in a session whose deletes carried something (the temp table
    # exists): a load into a table nothing was deleted from pays one WHEN test per row
    conn.execute(
        sql.SQL(
            "CREATE OR REPLACE TRIGGER {g} BEFORE INSERT ON {t} FOR EACH ROW "
            "WHEN (to_regclass('pg_temp.candlefire_seq_carry') IS NOT NULL) "
            "EXECUTE FUNCTION {f}()"
        ).format(g=keep, t=names.ident(), f=sql.Identifier(KEEP))
    )
