"""Declarative automation: parity reports (the default's and each generation's) refresh after
new store partitions, gated by the checks.

The conditions are evaluated by `parity_automation_sensor` (the daemon runs it under `make ui`).
`parity_refresh_schedule` still refreshes nightly when nothing new arrived (latency drifts too).
"""

from collections.abc import Sequence

import dagster as dg

AC = dg.AutomationCondition


#: Tags a generation's `<name>/parity_report`, so the sensor below evaluates it too.
GENERATION_REPORT_TAG = "candlefire/generation_report"


def parity_after_new_partitions(keys: Sequence[dg.AssetKey]) -> dg.AutomationCondition:
    """A parity report: some store partition was (re)materialized since the last refresh, no
    ingest is still running, and every blocking check on the gated stores (`keys`) passed
    (current versions, dimension, the two stores agree). A failed check there holds the refresh
    until a later ingest fixes it; an evaluated store's failed check (Qdrant) never does: the
    report shows that store's divergence instead."""
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
    target=dg.AssetSelection.groups("parity")
    | dg.AssetSelection.tag(GENERATION_REPORT_TAG, "true"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description=(
        "Evaluates the automation conditions of the parity group and of every generation's "
        "parity report (after new store partitions)."
    ),
)
