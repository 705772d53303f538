"""Which stores are retired now (the serving switch records it, operations/serving/state.py),
which are still written, and the lock a retirable store's writers and its retirement share."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from candlefire_pipeline.fsutil import file_lock
from candlefire_pipeline.operations.serving.state import (
    Retirement,
    read_state,
    salvaged_retirement,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import RETIRABLE_STORES


def retired_stores(settings: Settings) -> dict[str, Retirement]:
    """store -> its retirement. An unreadable switch retires what it still records and nothing
    else (writing a retired store is harmless: its way back checks it against the ledger)."""
    try:
        return read_state(settings.serving_file).retired
    except ValueError:
        return salvaged_retirement(settings.serving_file)


def written_stores(settings: Settings) -> tuple[str, ...]:
    """The fed stores (CANDLEFIRE_STORES) that are not retired: what is written and checked."""
    retired = retired_stores(settings)
    return tuple(store for store in settings.stores if store not in retired)


def retired_note(store: str, retirement: Retirement) -> str:
    """What a retired store's asset, checks and status say instead of its figures."""
    return f"{retirement.describe(store)}, not written"


@contextmanager
def store_writes(settings: Settings, store: str) -> Iterator[None]:
    """One writer of a retirable store at a time, across processes: its assets' steps (which
    decide whether it is retired, then write or pass over) and its retirement and way back. So
    no write is in flight when it retires, and none is passed over once it is written again."""
    if store not in RETIRABLE_STORES:
        yield
        return
    with file_lock(settings.data_dir / f"{store}_writes.lock"):
        yield
