"""The Postgres + pgvector versions of the stores: recorded in a parity report, read now for the
pgvector_version gate and `candlefire status` (the floor itself: backends/pg/version.py)."""

from __future__ import annotations

from candlefire_pipeline.backends.factory import resolve_dsn
from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.backends.pg.version import ServerVersions, read_versions
from candlefire_pipeline.settings import Settings


def backend_versions(backend) -> ServerVersions | None:
    """The versions of the server behind an open store; None for a store that is no Postgres."""
    conn = getattr(backend, "conn", None)
    return (
        read_versions(conn)
        if conn is not None and getattr(backend, "name", "") == "pgvector"
        else None
    )


def store_versions(stores: dict) -> dict[str, dict]:
    """store name -> its server's versions (as dicts), for every Postgres store among `stores`."""
    found = {name: backend_versions(backend) for name, backend in stores.items()}
    return {name: versions.to_dict() for name, versions in found.items() if versions is not None}


def live_versions(settings: Settings) -> ServerVersions:
    """The configured pgvector server's versions now (starts the embedded server if needed)."""
    with connect(resolve_dsn(settings)) as conn:
        return read_versions(conn)
