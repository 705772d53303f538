"""One dynamic partition per drop file; the key is the file name."""

import dagster as dg

ingest_batches = dg.DynamicPartitionsDefinition(name="ingest_batches")
