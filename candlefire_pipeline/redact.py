"""Connection strings made safe to log: never a user or a password."""

from __future__ import annotations


def redact_dsn(dsn: str | None) -> str:
    """A DSN safe to log: host, port and database only, never user or password."""
    if not dsn:
        return "embedded"
    from psycopg.conninfo import conninfo_to_dict

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:  # an unparsable DSN must still never be echoed
        return "<unparsable dsn>"
    host = parts.get("host") or "localhost"
    return f"postgresql://{host}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"
