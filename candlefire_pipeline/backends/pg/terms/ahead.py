"""The term cache's upkeep, run beside the writer's COPY: a thread on a connection of its own.

Everything but the final write needs none of the new rows in the table: reading the kept texts,
matching the new documents against them, reading the entries they may change, their exact
distances (from the rows' own vectors), the merge (2026-12-04, a 1% drop with 10,000 kept
texts: ~0.5 of ~0.6 s). None of it reads the chunk table, and nothing can change the kept state
meanwhile: a reader keeps entries only under the writers' lock taken shared (never waiting),
eviction happens only there, and every other change to an entry is a write's, under the lock
this writer holds. So `upkeep.prepare` runs while the COPY does (its HNSW inserts keep one
server core busy), on committed state that the writer's own transaction has not touched yet: a
write whose transaction cleared the cache, or created or altered its table, reads inline.

An optimization only: when the thread fails (no connection to spare, this transaction's DDL
holding the cache's table, a new cache its snapshot cannot see) the writer reads inline, as it
did before, with one INFO line saying why.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pgvector.psycopg import register_vector

from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.backends.pg.sql import Names
from candlefire_pipeline.backends.pg.terms import upkeep

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

#: The only lock the reads can meet is DDL of the writer's own transaction (it holds the lock
#: until it commits, after waiting for us): give up at once and let the writer read inline.
LOCK_TIMEOUT = "100ms"


class ReadAhead:
    """`upkeep.prepare(deleted, added, cap)` started now in a thread; result() waits for it."""

    def __init__(
        self, dsn: str, names: Names, deleted: Sequence[str], added: pa.Table, cap: int
    ) -> None:
        self.seconds = 0.0
        self._prepared: upkeep.Prepared | None = None
        self._failure = ""
        self._thread = threading.Thread(
            target=self._run,
            args=(dsn, names, list(deleted), added, cap),
            name=f"term-cache-read-ahead-{names.table}",
            daemon=True,
        )
        self._thread.start()

    def _run(self, dsn: str, names: Names, deleted: list[str], added: pa.Table, cap: int) -> None:
        started = time.perf_counter()
        try:
            with connect(dsn) as conn:
                conn.execute("SET default_transaction_read_only = on")
                conn.execute("SELECT set_config('lock_timeout', %s, false)", [LOCK_TIMEOUT])
                register_vector(conn)
                self._prepared = upkeep.prepare(conn, names, deleted, added, cap)
        except Exception as exc:  # the writer reads inline: only slower
            self._failure = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        finally:
            self.seconds = time.perf_counter() - started

    def result(self) -> upkeep.Prepared | None:
        """What the thread read; None (logged) when the writer must read inline."""
        self._thread.join()
        if self._prepared is None:
            log.info("term cache upkeep reads inline: the read ahead failed (%s)", self._failure)
        return self._prepared


def start(
    dsn: str,
    names: Names,
    deleted: Sequence[str],
    added: pa.Table | None,
    cap: int,
    inline: bool,
) -> ReadAhead | None:
    """A read ahead for this write, or None when the upkeep reads inline: nothing to add (no
    COPY to run beside), or `inline`: the cache is empty (nothing worth a connection), or this
    transaction cleared it (another connection would read the committed entries the writer no
    longer has) or created or altered its table (another connection could not read it)."""
    if added is None or added.num_rows == 0 or inline:
        return None
    return ReadAhead(dsn, names, deleted, added, cap)
