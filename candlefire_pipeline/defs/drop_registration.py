"""`candlefire register-drops`: a dynamic partition for every drop file, recorded as taken in."""

from __future__ import annotations

import dagster as dg

from candlefire_pipeline.corpus.drop_record import record_drops
from candlefire_pipeline.corpus.drop_scan import scan_drops
from candlefire_pipeline.corpus.drops import validate_batch_key
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.settings import Settings


def register_drops(settings: Settings, source: str = "register-drops") -> list[str]:
    """A dynamic partition for every drop file, and the drops recorded as taken in: the drop
    sensor launches nothing for them unless a file changes."""
    drops = scan_drops(settings.drops_dir)
    keys = [validate_batch_key(d.name) for d in drops]
    with dg.DagsterInstance.get() as instance:
        known = set(instance.get_dynamic_partitions(ingest_batches.name))
        instance.add_dynamic_partitions(ingest_batches.name, [k for k in keys if k not in known])
    record_drops(settings.drop_record_file, drops, source=source)
    return keys
