"""The term cache's tables: entries beside the chunk table, and the content version that proves
the cache describes the rows every reader sees.

A maintained write (the store's, which keeps the cache exact in its transaction) bumps
`content_version` and sets `cache_version` to it as its last statement. Any other statement that
writes the chunk table (one that bypasses the store, a manual DELETE say) bumps only
`content_version`, through a statement trigger that the maintained writer switches off for its
own transaction (MAINTAINED): readers use the cache only while the two versions are equal, so
such a write disables the cache until the next maintained write clears and revalidates it. The
store's own statements thus never lock the meta row before their end, and a transaction holding
a chunk row waits only where it conflicts.
"""

from __future__ import annotations

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.sql import Names

#: The transaction-local setting a maintained writer turns on (its statements bump nothing).
MAINTAINED = "candlefire.maintained_write"
#: Half of each page of entries left free: a write's new version of an entry then fits on its
#: page, a HOT update that writes no index (no indexed column changes). Measured on 10,000
#: entries, 2,200 changed (a 1% drop): UPDATE 8 ms at 50, 22-51 ms full and compact, 80-140 ms
#: full and bloated by earlier non-HOT updates.
FILLFACTOR = 50


def terms_table(names: Names) -> sql.Identifier:
    return names.ident("_terms")


def _function(names: Names) -> sql.Identifier:
    return names.ident("_bump_version")


def _trigger(names: Names) -> sql.Identifier:
    return names.ident("_content_version")


def change_channel(names: Names) -> str:
    """The LISTEN channel a commit that moves the table's content version notifies."""
    return f"candlefire_{names.table}"


def _notify_function(names: Names) -> sql.Identifier:
    return names.ident("_notify_change")


def _notify_trigger(names: Names) -> sql.Identifier:
    return names.ident("_change_notify")  # _notifies() looks it up by this name


def notify_statements(names: Names) -> list[sql.Composed]:
    """Idempotent DDL: every update of the content version notifies the change channel with the
    new version, delivered at its commit (an app process copying answers drops them then)."""
    return [
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN PERFORM pg_notify({c}, NEW.content_version::text); RETURN NULL; END$$"
        ).format(f=_notify_function(names), c=sql.Literal(change_channel(names))),
        sql.SQL(
            "CREATE OR REPLACE TRIGGER {g} AFTER UPDATE OF content_version ON {m} FOR EACH ROW "
            "WHEN (OLD.content_version IS DISTINCT FROM NEW.content_version) "
            "EXECUTE FUNCTION {f}()"
        ).format(g=_notify_trigger(names), m=names.meta, f=_notify_function(names)),
    ]


def create_statements(names: Names, dim: int) -> list[sql.Composed]:
    """Idempotent DDL: the version columns and trigger, the entries table and its indexes."""
    terms, meta = terms_table(names), names.meta
    return [
        sql.SQL(
            "ALTER TABLE {m} ADD COLUMN IF NOT EXISTS content_version bigint NOT NULL DEFAULT 0, "
            "ADD COLUMN IF NOT EXISTS cache_version bigint NOT NULL DEFAULT 0"
        ).format(m=meta),
        sql.SQL(
            "CREATE OR REPLACE FUNCTION {f}() RETURNS trigger LANGUAGE plpgsql AS "
            "$$BEGIN IF coalesce(current_setting({g}, true), '') <> 'on' THEN "
            "UPDATE {m} SET content_version = content_version + 1; END IF; RETURN NULL; END$$"
        ).format(f=_function(names), m=meta, g=sql.Literal(MAINTAINED)),
        sql.SQL(
            "CREATE OR REPLACE TRIGGER {g} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {t} "
            "FOR EACH STATEMENT EXECUTE FUNCTION {f}()"
        ).format(g=_trigger(names), t=names.ident(), f=_function(names)),
        sql.SQL(
            """CREATE TABLE IF NOT EXISTS {e} (
            id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
            kind text NOT NULL, recipe text NOT NULL, model_id text NOT NULL, text text NOT NULL,
            vector vector({dim}), listed boolean NOT NULL DEFAULT false,
            ids text[] NOT NULL DEFAULT '{{}}', distances float8[] NOT NULL DEFAULT '{{}}',
            complete boolean NOT NULL DEFAULT false, approximate boolean NOT NULL DEFAULT false,
            witness text, witness_known boolean NOT NULL DEFAULT false,
            abstract_witness text, abstract_known boolean NOT NULL DEFAULT false,
            hits bigint NOT NULL DEFAULT 0, fills bigint NOT NULL DEFAULT 1,
            created_at timestamptz NOT NULL DEFAULT now(),
            used_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (kind, recipe, model_id, text)) WITH (fillfactor = {ff})"""
        ).format(e=terms, dim=sql.Literal(int(dim)), ff=sql.Literal(FILLFACTOR)),
        # a column added after the table's first layout: a cache made before it gains it empty
        sql.SQL("ALTER TABLE {e} ADD COLUMN IF NOT EXISTS abstract_first text").format(e=terms),
        sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {e} (used_at)").format(
            i=names.ident("_terms_used"), e=terms
        ),
        *notify_statements(names),
    ]


def upgrade(conn: psycopg.Connection, names: Names) -> list[str]:
    """Bring a cache made by an earlier version to this one's layout; what was done (empty:
    nothing, no lock taken)."""
    done = []
    index = names.ident("_terms_members").as_string(conn)
    if conn.execute("SELECT to_regclass(%s) IS NOT NULL", [index]).fetchone()[0]:
        # every keep and every upkeep wrote it, and its pending list made each writer's search
        # slower than the hashed pass over the cache that replaced it (matching.py)
        conn.execute(sql.SQL("DROP INDEX {i}").format(i=names.ident("_terms_members")))
        done.append("dropped its members index")
    options = conn.execute(
        "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE oid = to_regclass(%s)",
        [terms_table(names).as_string(conn)],
    ).fetchone()[0]
    if f"fillfactor={FILLFACTOR}" not in options:
        # new pages only: the pages written from now on leave room for HOT updates
        conn.execute(
            sql.SQL("ALTER TABLE {e} SET (fillfactor = {ff})").format(
                e=terms_table(names), ff=sql.Literal(FILLFACTOR)
            )
        )
        done.append(f"set fillfactor {FILLFACTOR}")
    if not _notifies(conn, names):
        for statement in notify_statements(names):
            conn.execute(statement)
        done.append("added change notifications")
    return done


def _notifies(conn: psycopg.Connection, names: Names) -> bool:
    found = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = %s AND tgrelid = to_regclass(%s))",
        [f"{names.table}_change_notify", names.meta.as_string(conn)],
    ).fetchone()[0]
    return bool(found)


def members(alias: str = "e") -> sql.Composed:
    """An entry's members: its listed ids, both witnesses and the first abstract holder."""
    return sql.SQL(
        "({a}.ids || ARRAY[coalesce({a}.witness, ''), coalesce({a}.abstract_witness, ''), "
        "coalesce({a}.abstract_first, '')])"
    ).format(a=sql.Identifier(alias))


def drop_statements(names: Names) -> list[sql.Composed]:
    return [
        sql.SQL("DROP TABLE IF EXISTS {e}").format(e=terms_table(names)),
        sql.SQL("DROP FUNCTION IF EXISTS {f}() CASCADE").format(f=_function(names)),
        sql.SQL("DROP FUNCTION IF EXISTS {f}() CASCADE").format(f=_notify_function(names)),
    ]


def exists(conn: psycopg.Connection, names: Names) -> bool:
    name = terms_table(names).as_string(conn)
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()[0]


def valid_condition(names: Names) -> sql.Composed:
    """SQL true while the cache describes the table's current content."""
    return sql.SQL("(SELECT cache_version = content_version FROM {m})").format(m=names.meta)


def versions(conn: psycopg.Connection, names: Names) -> tuple[int, int]:
    """(content_version, cache_version) as this statement sees them."""
    query = sql.SQL("SELECT content_version, cache_version FROM {m}").format(m=names.meta)
    row = conn.execute(query).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def maintained(conn: psycopg.Connection) -> None:
    """This transaction keeps the cache itself: its writes leave the versions to validate()."""
    conn.execute("SELECT set_config(%s, 'on', true)", [MAINTAINED])


def validate(conn: psycopg.Connection, names: Names) -> None:
    """Last in a maintained write: a new content version, which the cache describes."""
    conn.execute(
        sql.SQL(
            "UPDATE {m} SET content_version = content_version + 1, "
            "cache_version = content_version + 1"
        ).format(m=names.meta)
    )


def has_entries(conn: psycopg.Connection, names: Names) -> bool:
    """Whether this transaction sees any kept entry."""
    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {e})").format(e=terms_table(names))
    return conn.execute(query).fetchone()[0]


def clear(conn: psycopg.Connection, names: Names) -> int:
    """Forget every entry (inside the writer's transaction); returns how many there were."""
    terms = terms_table(names)
    count = conn.execute(sql.SQL("SELECT count(*) FROM {e}").format(e=terms)).fetchone()[0]
    conn.execute(sql.SQL("DELETE FROM {e}").format(e=terms))
    return int(count)
