"""A read-only Postgres role for the serving app: it can query the chunks, never change them."""

from __future__ import annotations

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.sql import Names


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


def ensure_reader_role(
    dsn: str, role: str, password: str | None = None, table: str = "chunks"
) -> None:
    """Create `role` (LOGIN, read-only) if missing and grant it SELECT on the store."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
        if not exists:
            create = sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role))
            if password:
                create = sql.SQL("{} PASSWORD {}").format(create, sql.Literal(password))
            conn.execute(create)
        database = conn.execute("SELECT current_database()").fetchone()[0]
        for statement in reader_role_statements(role, database, table):
            conn.execute(statement)
