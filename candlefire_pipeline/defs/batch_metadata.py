"""Materialization metadata of a step that handled one drop file or a backfill range of them."""

from collections.abc import Mapping, Sequence

import dagster as dg


def combined(
    per_batch: Mapping[str, dict], summed: Sequence[str], listed: Sequence[str] = ()
) -> dict:
    """One batch: its metadata unchanged. Several: `summed` totals and a row per batch (the
    summed columns, then the `listed` ones, which have no meaningful total)."""
    if len(per_batch) == 1:
        return next(iter(per_batch.values()))
    columns = [*summed, *listed]
    totals = {key: sum(meta[key] for meta in per_batch.values()) for key in summed}
    header = "| batch | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns)
    rows = [
        f"| {key} | " + " | ".join(str(meta[k]) for k in columns) + " |"
        for key, meta in per_batch.items()
    ]
    return {
        **totals,
        "batches": len(per_batch),
        "per_batch": dg.MetadataValue.md("\n".join([header, *rows])),
    }


def batch_span(keys: Sequence[str]) -> str:
    """The step's drop files for a message: the one key, or first .. last (count)."""
    if len(keys) == 1:
        return keys[0]
    return f"{keys[0]} .. {keys[-1]} ({len(keys)} drop files)"
