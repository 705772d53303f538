"""Operator verbs on the core (no Dagster): apply a batch, run parity, the serving switch,
status, query. The Dagster assets and the `candlefire` CLI both call these."""
