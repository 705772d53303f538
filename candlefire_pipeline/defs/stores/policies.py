"""How store writes run: one pool per store, and retries for transient connection errors only.

Pools are enforced per run (dagster.yaml `concurrency.pools.granularity: run`): a queued run
that writes Postgres waits while another run holding `postgres_writes` is in progress.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from candlefire_pipeline.backends.transient import is_transient
from candlefire_pipeline.stores import CHROMA, PGVECTOR, QDRANT

POSTGRES_POOL = "postgres_writes"
CHROMA_POOL = "chroma_writes"
QDRANT_POOL = "qdrant_writes"
#: store name -> the pool its asset and its ledger check run in
STORE_POOLS = {PGVECTOR: POSTGRES_POOL, CHROMA: CHROMA_POOL, QDRANT: QDRANT_POOL}
#: The kind tag of each store's assets (the Dagster UI's icon).
STORE_KINDS = {PGVECTOR: "postgres", CHROMA: "chromadb", QDRANT: "qdrant"}

#: 1 + 2 + 4 + 8 + 16 s (each +/- jitter): rides out a store restart of about half a minute.
STORE_WRITE_RETRY = dg.RetryPolicy(
    max_retries=5, delay=1.0, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


@contextmanager
def retried_only_if_transient(what: str) -> Iterator[None]:
    """Transient errors propagate as they are (STORE_WRITE_RETRY retries them); anything else
    becomes a Failure that is never retried (the same data fails the same way every time)."""
    try:
        yield
    except Exception as exc:
        if is_transient(exc):
            raise
        raise dg.Failure(
            description=f"{what}: {type(exc).__name__}: {exc} (a data error: not retried)",
            allow_retries=False,
        ) from exc
