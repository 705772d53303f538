"""A read-only Postgres role for the serving app: it can query the chunks, never change them."""

from __future__ import annotations

import logging

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.sql import Names

log = logging.getLogger(__name__)


def reader_role_statements(role: str, database: str, table: str = "chunks") -> list[sql.Composed]:
    """The grants (without CREATE ROLE) that let `role` serve queries from `table`."""
    names, ident = Names(table), sql.Identifier(role)
    return [
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(database), ident),
        sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident),
        sql.SQL("GRANT SELECT ON {}, {} TO {}").format(names.ident(), names.meta, ident),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}").format(
            ident
        ),
        sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(ident),
    ]


def term_cache_statements(role: str, table: str = "chunks") -> list[sql.Composed]:
    """What the role may write: the term cache's entries (kept answers), nothing else."""
    names, ident = Names(table), sql.Identifier(role)
    terms = names.ident("_terms")
    return [
        sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(terms, ident),
        sql.SQL("GRANT USAGE ON SEQUENCE {} TO {}").format(names.ident("_terms_id_seq"), ident),
    ]


def ensure_reader_role(
    dsn: str, role: str, password: str | None = None, table: str = "chunks"
) -> None:
    """Create `role` (LOGIN, read-only) if missing and grant it SELECT on the store, and the
    writes of the term cache when the store has one (run it again after the first write)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
        if not exists:
            create = sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role))
            if password:
                create = sql.SQL("{} PASSWORD {}").format(create, sql.Literal(password))
            conn.execute(create)
        database = conn.execute("SELECT current_database()").fetchone()[0]
        statements = reader_role_statements(role, database, table)
        cache = conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", [Names(table).ident("_terms").as_string(conn)]
        ).fetchone()[0]
        if cache:
            statements += term_cache_statements(role, table)
        else:
            log.warning("%s has no term cache yet: %s may read it, not keep answers in it; run "
                        "this again after the first write", table, role)  # fmt: skip
        # the switch's published copy (an app without the switch file follows it); a later
        # copy's table is covered by the default privileges above
        if conn.execute("SELECT to_regclass('serving_switch') IS NOT NULL").fetchone()[0]:
            statements.append(sql.SQL("GRANT SELECT ON serving_switch TO {}").format(
                sql.Identifier(role)))  # fmt: skip
        for statement in statements:
            conn.execute(statement)
