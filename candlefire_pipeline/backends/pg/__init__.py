"""Postgres + pgvector: backend, SQL, layout, bulk load, connection, roles, embedded server."""
