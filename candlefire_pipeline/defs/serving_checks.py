"""`serving_not_degraded`: on every asset that sends windows to the switch, a check that fails
while the promoted deployment is DEGRADED or was rolled back by the auto-rollback."""

import dagster as dg

from candlefire_pipeline.defs.resources import PipelineResource
from candlefire_pipeline.operations.serving.state import read_state
from candlefire_pipeline.operations.serving.watch import serving_health

DESCRIPTION = (
    "The serving switch is not DEGRADED (a fresh parity report or shadow window failed a gate "
    "while pgvector serves) and not auto-rolled back (a pin the auto-rollback set): either "
    "needs an operator (`candlefire rollback` / `candlefire promote`)."
)


def serving_not_degraded(asset_key: dg.AssetKey) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset_key, name="serving_not_degraded", description=DESCRIPTION)
    def _check(pipeline: PipelineResource) -> dg.AssetCheckResult:
        try:
            state = read_state(pipeline.settings().serving_file)
        except ValueError as exc:
            return dg.AssetCheckResult(passed=False, metadata={"detail": str(exc)})
        healthy, detail = serving_health(state)
        return dg.AssetCheckResult(
            passed=healthy,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={"detail": detail, "state": state.state},
        )

    return _check
