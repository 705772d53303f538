"""The stores by name and by role: the one definition settings, backends, parity, serving and the
Dagster layer read (it imports nothing).

The migration has three roles: the reference (Chroma, what candle-fire serves from today), the
candidate (pgvector, the target) and the exact in-process oracle (memory). The reference and the
candidate are the gated pair: both must be fed, the parity gates compare them, a parity run
cannot leave either out, and they are the only stores the serving switch flips between. Every
other fed store (Qdrant) is evaluated beside them and never blocks anything.
"""

from __future__ import annotations

PGVECTOR, CHROMA, QDRANT, MEMORY = "pgvector", "chroma", "qdrant", "memory"

#: Every persistent store an ingest batch can be applied to, in canonical order.
STORE_NAMES = (PGVECTOR, CHROMA, QDRANT)
#: Every backend that can be opened by name; memory is the exact in-process oracle.
BACKEND_NAMES = (*STORE_NAMES, MEMORY)
#: The stores fed when CANDLEFIRE_STORES is unset.
DEFAULT_STORES = STORE_NAMES

REFERENCE = CHROMA
CANDIDATE = PGVECTOR
ORACLE = MEMORY

#: The pair the gates compare: each must be fed and neither may be left out of a parity run.
GATED_STORES = (REFERENCE, CANDIDATE)
#: What the serving switch (and the reader's override) may serve from.
SERVABLE_STORES = GATED_STORES
#: Fed stores that must be fed (canonical order, as CANDLEFIRE_STORES lists them).
REQUIRED_STORES = tuple(name for name in STORE_NAMES if name in GATED_STORES)

#: Substring semantics a store's keyword search can be asked for: "like" is case-sensitive (Chroma's
#: $contains, Qdrant's MatchSubstring), "ilike" case-insensitive (the design doc's choice).
SUBSTRING_MODES = ("like", "ilike")

#: Stores `candlefire retire` stops writing once the candidate has served on evidence (the
#: reference; its way back is `candlefire unretire`). An evaluated store (Qdrant) is retired by
#: leaving it out of CANDLEFIRE_STORES; the candidate serves and is never retired.
RETIRABLE_STORES = (REFERENCE,)
