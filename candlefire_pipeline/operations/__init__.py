"""Operator verbs on the core (no Dagster): apply a batch, run and judge parity, the serving
switch (state machine, history, promote/rollback), the app's read path, status, query. The
Dagster assets and the `candlefire` CLI both call these."""
