"""parity_report and the serving_backend switch it gates (the decision lives in operations/)."""

import base64
import logging
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from candlefire_pipeline.defs.automation import DECIDE_AFTER_PARITY, parity_after_new_partitions
from candlefire_pipeline.defs.resources import (
    PgVectorResource,
    PipelineResource,
    store_resources,
)
from candlefire_pipeline.defs.stores.assets import STORE_ASSETS
from candlefire_pipeline.defs.stores.policies import POSTGRES_POOL
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.operations.parity import latest_evaluation, open_stores, run_report
from candlefire_pipeline.operations.retirement.view import written_stores
from candlefire_pipeline.operations.serving.commands import auto_promote
from candlefire_pipeline.operations.serving.history import pending_entries
from candlefire_pipeline.operations.serving.watch import (
    REPORT_SOURCE,
    WatchResult,
    judge,
    serving_health,
    watch,
)
from candlefire_pipeline.parity.gates import (
    INLINE_MARKDOWN_CHARS,
    failed,
    gate_table_markdown,
    gates_from_dicts,
)
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline.parity.report.markdown import plots_section, report_markdown
from candlefire_pipeline.parity.report.model import ParityReport
from candlefire_pipeline.stores import (
    CANDIDATE,
    GATED_STORES,
    PGVECTOR,
    STORE_NAMES,
)

PARITY_REPORT = dg.AssetKey("parity_report")


def data_uri(path: Path) -> str:
    """A PNG as a data: URI: the Dagster UI's markdown renderer allows data: image sources (and
    serves no files of ours), so this is how a plot shows on the asset page."""
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def plots_markdown(report: ParityReport, reports_dir: Path) -> str:
    """The report's plots as markdown images the UI renders inline (data: URIs)."""
    lines = plots_section(report, lambda name: data_uri(reports_dir / name))
    return "\n".join(lines) if lines else "No plots: the report has no query timings."


def build_parity_report(stores: Sequence[str]) -> dg.AssetsDefinition:
    """parity_report over the fed stores (deps); only the gated pair's checks hold its refresh."""

    @dg.asset(
        name=PARITY_REPORT.path[-1],
        group_name="parity",
        kinds={"python"},
        deps=[STORE_ASSETS[name] for name in stores],
        required_resource_keys={"pipeline", *STORE_NAMES},
        automation_condition=parity_after_new_partitions(
            [key for s in GATED_STORES for key in STORE_ASSETS[s].keys]
        ),
        description=(
            "The committed query set through the full retriever (entity, keyword and semantic "
            "search, RRF, rerank, boost) on every fed store and the exact in-memory oracle: one "
            "column per store (top-15 overlap, grounding and keyword agreement, ANN recall, "
            "p50/p95) and Chroma vs pgvector, whose blocking checks are the gates of the flip. "
            "Evaluated stores (Qdrant) never block it. Once Chroma is retired, the gates judge "
            "pgvector against the exact oracle and candle-fire's recorded answers (the Chroma "
            "column says retired). `gates` shows the gates, `plots` the latency and overlap "
            "plots, `report` the whole report."
        ),
    )
    def parity_report(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        pipeline = context.resources.pipeline
        settings = pipeline.settings()
        resources = store_resources(context)
        # a retired store is not opened: its files may be gone (the oracle stands in for it)
        with open_stores(**{name: resources[name] for name in written_stores(settings)}) as opened:
            report = run_report(settings, pipeline.query_embedder(), opened)
        json_path, md_path = write_report(report, settings.reports_dir)
        headline = report.headline()
        context.log.info(
            "parity: " + ", ".join(f"{k}={v:.3f}" for k, v in sorted(headline.items()))
        )
        for store, why in report.unavailable.items():
            context.log.warning(f"{store} was not evaluated (it does not block the flip): {why}")
        window = judge(REPORT_SOURCE, report.report_id, gates_from_dicts(report.gates))
        watched = watch(
            settings, window, "dagster:parity_report", resources[PGVECTOR].resolved_dsn()
        )
        log_watch(context, watched)
        return dg.MaterializeResult(
            metadata={
                **_report_metadata(report, json_path, md_path),
                "serving_watch": watched.message,
            }
        )

    return parity_report


def log_watch(context: dg.AssetExecutionContext, watched: WatchResult) -> None:
    """What a window did to the switch, in the run's log at the level it deserves."""
    if watched.level >= logging.ERROR:
        context.log.error(watched.message)
    elif watched.level >= logging.WARNING:
        context.log.warning(watched.message)
    else:
        context.log.info(watched.message)


def _report_metadata(report: ParityReport, json_path: Path, md_path: Path) -> dict:
    gates = gates_from_dicts(report.gates)
    return {
        "report_id": report.report_id,
        # short enough for the asset page to show inline (the whole report is behind a link)
        "gates": dg.MetadataValue.md(gate_table_markdown(gates, INLINE_MARKDOWN_CHARS)),
        "failed_gates": ", ".join(failed(gates)) or "none",
        "stores": ", ".join(f"{s} ({report.role(s)})" for s in report.stores()),
        "retired_stores": ", ".join(f"{s} since {r['since']}" for s, r in report.retired.items())
        or "none",
        "diverging_stores": ", ".join(report.diverging_stores()) or "none",
        "unavailable_stores": ", ".join(report.unavailable) or "none",
        "plots": dg.MetadataValue.md(plots_markdown(report, md_path.parent)),
        "report": dg.MetadataValue.md(
            report_markdown(report, image_link=lambda name: data_uri(md_path.parent / name))
        ),
        "json_path": dg.MetadataValue.path(str(json_path)),
        "markdown_path": dg.MetadataValue.path(str(md_path)),
        **{k: dg.MetadataValue.float(float(v)) for k, v in report.headline().items()},
    }


#: Every known store: what the tests materialize. definitions.py builds it for the fed stores.
parity_report = build_parity_report(STORE_NAMES)


@dg.asset(
    group_name="parity",
    kinds={"postgres"},
    deps=[PARITY_REPORT],
    pool=POSTGRES_POOL,
    automation_condition=DECIDE_AFTER_PARITY,
    description=(
        "The serving switch the app reads (data/serving_backend.json, history in Postgres): "
        "promotes to pgvector only from the never-promoted state on a report passing every "
        "gate; an operator's pin (`candlefire rollback`) holds until `candlefire promote`. "
        "`serving_backend` below is the state now."
    ),
)
def serving_backend(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, pgvector: PgVectorResource
) -> dg.MaterializeResult:
    settings = pipeline.settings()
    report, gates = latest_evaluation(settings)
    outcome = auto_promote(settings, report, gates, dsn=pgvector.resolved_dsn())
    state, decision = outcome.state, outcome.decision
    context.log.info(
        f"serving backend: {state.describe()} ({decision.outcome}: {decision.message})"
    )
    # the parity report judges the default generation: another one serving has its comparison
    if state.degraded:
        context.log.error(f"serving {state.describe()}")
    elif state.backend == CANDIDATE and state.generation == DEFAULT_NAME and failed(gates):
        context.log.warning(
            f"serving pgvector while the latest report fails {', '.join(failed(gates))}: "
            f"{state.way_back()}"
        )
    return dg.MaterializeResult(
        metadata={
            "serving_backend": state.backend,
            "generation": state.generation,
            "state": state.state,
            "describe": state.describe(),
            "pinned": state.pinned,
            "pin_reason": state.reason if state.pinned else "",
            "degraded": state.degraded,
            "healthy": serving_health(state)[0],
            "flipped_now": decision.outcome == "changed",
            "decision": decision.outcome,
            "verdict": decision.message,
            "failed_gates": ", ".join(failed(gates)) or ("no report" if report is None else "none"),
            "report_id": report.report_id if report else "",
            "gates": dg.MetadataValue.md(gate_table_markdown(gates, INLINE_MARKDOWN_CHARS)),
            "pending_history": len(pending_entries(settings.serving_pending_file)),
        }
    )
