"""Materialization metadata of a step that handled one drop file or a backfill range of them."""

from collections.abc import Mapping, Sequence

import dagster as dg


def combined(per_batch: Mapping[str, dict], summed: Sequence[str]) -> dict:
    """One batch: its metadata unchanged. Several: `summed` totals and a row per batch."""
    if len(per_batch) == 1:
        return next(iter(per_batch.values()))
    totals = {key: sum(meta[key] for meta in per_batch.values()) for key in summed}
    header = "| batch | " + " | ".join(summed) + " |\n|---|" + "---|" * len(summed)
    rows = [
        f"| {key} | " + " | ".join(str(meta[k]) for k in summed) + " |"
        for key, meta in per_batch.items()
    ]
    return {
        **totals,
        "batches": len(per_batch),
        "per_batch": dg.MetadataValue.md("\n".join([header, *rows])),
    }
