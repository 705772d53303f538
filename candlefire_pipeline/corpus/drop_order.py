"""Drops apply in file-name order: a paper held by two drops keeps the later name's version.

A drop registered after others but named to sort before one already applied is applied as if
it were older: where both hold a paper, the applied drop's version stays. That is the rule
(docs/OPERATIONS.md), and here it is said where the operator looks, when the drop arrives.
"""

from __future__ import annotations

from collections.abc import Iterable

from candlefire_pipeline.corpus.ledger import StoreLedger


def sorting_before(new: Iterable[str], applied: Iterable[str]) -> dict[str, list[str]]:
    """Each new drop name -> the drops already applied whose names sort after it."""
    done = sorted(set(applied))
    return {name: later for name in new if (later := [a for a in done if a > name])}


def applied_drops(batches_dir, stores: Iterable[str]) -> set[str]:
    """Batch keys (drop names) applied to any of the stores."""
    return {key for store in stores for key in StoreLedger(batches_dir, store).applied()}


def order_warning(name: str, later: list[str]) -> str:
    shown = ", ".join(later[:3]) + (f" and {len(later) - 3} more" if len(later) > 3 else "")
    return (
        f"{name} sorts before {shown}, already applied: drops apply in file-name order, so "
        f"where they hold the same paper the applied version stays and {name}'s is held back; "
        "if this drop is newer, give it a name that sorts last (e.g. a date prefix)"
    )
