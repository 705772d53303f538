"""`candlefire register-drops`: a dynamic partition for every drop file, recorded as taken in."""

from __future__ import annotations

import logging

import dagster as dg

from candlefire_pipeline.corpus.drop_order import applied_drops, order_warning, sorting_before
from candlefire_pipeline.corpus.drop_record import record_drops
from candlefire_pipeline.corpus.drop_scan import scan_drops
from candlefire_pipeline.corpus.drops import validate_batch_key
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)


def register_drops(
    settings: Settings, source: str = "register-drops", warn=log.warning
) -> list[str]:
    """A dynamic partition for every drop file, and the drops recorded as taken in: the drop
    sensor launches nothing for them unless a file changes. `warn` is told of each new drop
    that sorts before a drop already applied (its overlapping papers will be held back)."""
    drops = scan_drops(settings.drops_dir)
    keys = [validate_batch_key(d.name) for d in drops]
    with dg.DagsterInstance.get() as instance:
        known = set(instance.get_dynamic_partitions(ingest_batches.name))
        new = [k for k in keys if k not in known]
        instance.add_dynamic_partitions(ingest_batches.name, new)
    applied = applied_drops(settings.batches_dir, settings.stores)
    for name, later in sorting_before(new, applied).items():
        warn(order_warning(name, later))
    record_drops(settings.drop_record_file, drops, source=source)
    return keys
