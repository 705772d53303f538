"""The pgvector version floor: which releases every Postgres the project writes to must have.

pgvector 0.8.3 fixed possible HNSW index corruption during vacuum and 0.8.4 a `hnsw graph not
repaired` error when vacuuming; replacing papers on every drop (delete + insert, then vacuum) is
exactly the workload they concern. A server below the floor keeps taking writes (so it can be
upgraded in place) but is reported by `candlefire status` and blocks promotion (parity/gates.py).
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass

import psycopg

log = logging.getLogger(__name__)

#: pgvector release -> what it fixed that this project's workload needs.
FIXES: dict[tuple[int, ...], str] = {
    (0, 8, 3): "possible HNSW index corruption during vacuum",
    (0, 8, 4): "the `hnsw graph not repaired` error when vacuuming HNSW",
}
FLOOR: tuple[int, ...] = max(FIXES)


def parse_version(text: str) -> tuple[int, ...]:
    """'0.8.2' -> (0, 8, 2); a suffix such as '0.9.0-beta' keeps its numeric part."""
    numbers = re.match(r"^\s*(\d+(?:\.\d+)*)", text or "")
    if numbers is None:
        raise ValueError(f"not a version: {text!r}")
    return tuple(int(part) for part in numbers.group(1).split("."))


def dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def missing_fixes(version: str) -> list[str]:
    """The fixes `version` lacks, as 'X.Y.Z (what it fixed)', oldest first ([] at the floor)."""
    have = parse_version(version)
    return [f"{dotted(v)} ({what})" for v, what in sorted(FIXES.items()) if have < v]


@dataclass(frozen=True)
class ServerVersions:
    """What a Postgres server runs: its version, and pgvector's installed / available version."""

    postgres: str
    pgvector: str | None  # extversion in this database (None: the extension is not installed)
    pgvector_available: str | None = None  # default_version of the files on the server

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> ServerVersions | None:
        return cls(**data) if data else None

    def below_floor(self) -> bool:
        return self.pgvector is not None and bool(missing_fixes(self.pgvector))

    def floor_problem(self) -> str | None:
        """Why this server is below the floor, and what to do; None when it is not."""
        if not self.below_floor():
            return None
        lacks = " and ".join(missing_fixes(self.pgvector))
        cure = f"install pgvector >= {dotted(FLOOR)} on the server, then"
        available = self.pgvector_available
        if available and not missing_fixes(available):
            cure = f"pgvector {available} is installed on the server:"
        return (
            f"pgvector {self.pgvector} is below {dotted(FLOOR)}: it lacks the fixes of {lacks}; "
            f"writes continue, promotion is blocked until it is upgraded ({cure} run "
            "`ALTER EXTENSION vector UPDATE` and `REINDEX INDEX CONCURRENTLY` on its HNSW "
            "indexes, which may already hold the corruption)"
        )

    def describe(self) -> str:
        vector = f"pgvector {self.pgvector}" if self.pgvector else "no pgvector"
        return f"Postgres {self.postgres}, {vector}"


VERSIONS_SQL = """
SELECT current_setting('server_version'),
       (SELECT extversion FROM pg_extension WHERE extname = 'vector'),
       (SELECT default_version FROM pg_available_extensions WHERE name = 'vector')
"""


def read_versions(conn: psycopg.Connection) -> ServerVersions:
    """The server's versions, read on an open connection (no write, works read-only)."""
    postgres, installed, available = conn.execute(VERSIONS_SQL).fetchone()
    return ServerVersions(postgres.split()[0], installed, available)


def warn_below_floor(versions: ServerVersions, where: str) -> None:
    """One warning per connection to a server below the floor (writes still go ahead)."""
    problem = versions.floor_problem()
    if problem:
        log.warning("Postgres at %s: %s", where, problem)
