"""One dynamic partition per drop file; the key is the file name. Backfills group them into runs."""

import warnings

import dagster as dg

from candlefire_pipeline.corpus.drops import validate_batch_key
from candlefire_pipeline.settings import backfill_partitions_per_run

# backfill_policy is "beta" in dagster 1.13 (stable in behaviour since 1.5): say so once, here,
# instead of one warning per partitioned asset at every code-location load.
warnings.filterwarnings("ignore", message="Parameter `backfill_policy`", category=dg.BetaWarning)

ingest_batches = dg.DynamicPartitionsDefinition(name="ingest_batches")

#: Every partitioned asset shares it, so a backfill run carries a drop range through all stages
#: (one process start per range instead of one per drop file).
ingest_backfill_policy = dg.BackfillPolicy.multi_run(
    max_partitions_per_run=backfill_partitions_per_run()
)


def batch_keys(context: dg.AssetExecutionContext) -> list[str]:
    """This step's drop files in file-name order, the order the ledger applies them in."""
    return sorted(validate_batch_key(key) for key in context.partition_keys)
