"""Declarative automation: parity refreshes after new store partitions, gated by the checks.

The conditions are evaluated by `parity_automation_sensor` (the daemon runs it under `make ui`).
`parity_refresh_schedule` still refreshes nightly when nothing new arrived (latency drifts too).
"""

from collections.abc import Sequence

import dagster as dg

AC = dg.AutomationCondition


def parity_after_new_partitions(gated: Sequence[dg.AssetsDefinition]) -> dg.AutomationCondition:
    """parity_report: some store partition was (re)materialized since the last refresh, no
    ingest is still running, and every blocking check on the GATED stores passed (current
    versions, dimension, the two stores agree). A failed check there holds the refresh until a
    later ingest fixes it; an evaluated store's failed check (Qdrant) never does: the report
    shows that store's divergence instead."""
    keys = [key for asset in gated for key in asset.keys]
    return (
        AC.any_deps_updated().since_last_handled()
        & ~AC.any_deps_in_progress()
        & ~AC.in_progress()
        & AC.all_deps_blocking_checks_passed().allow(dg.AssetSelection.assets(*keys))
    ).with_label("after new store partitions, the gated stores' checks passed")


#: serving_backend: re-decided after every fresh report whose blocking gate checks passed (the
#: asset's `auto_promote` decides; an operator's pin holds).
DECIDE_AFTER_PARITY = (
    AC.any_deps_updated().since_last_handled()
    & ~AC.any_deps_in_progress()
    & ~AC.in_progress()
    & AC.all_deps_blocking_checks_passed()
).with_label("after a fresh parity report, gates passed")

parity_automation_sensor = dg.AutomationConditionSensorDefinition(
    "parity_automation_sensor",
    target=dg.AssetSelection.groups("parity"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Evaluates the parity group's automation conditions (after new store partitions).",
)
