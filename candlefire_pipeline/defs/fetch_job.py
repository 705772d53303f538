"""pubmed_fetch_job: new PubMed records for the configured query become one drop file.

The drop is written as `.part` and renamed when complete, so the drop sensor takes it from
there; a day with no new records writes nothing, a failed fetch leaves nothing behind.
"""

from datetime import date

import dagster as dg

from candlefire_pipeline.corpus.pubmed import EFETCH_BATCH, PubmedFetchError
from candlefire_pipeline.defs.resources import PipelineResource, PubmedResource


class FetchWindow(dg.Config):
    """What to fetch: PubMed records added (Entrez date) from `since` through `until`."""

    query: str
    since: str  # YYYY-MM-DD
    until: str  # YYYY-MM-DD
    batch_size: int = EFETCH_BATCH  # records per efetch request


@dg.op(
    description="esearch + efetch for the window; one drop file in the drops folder, or none.",
    tags={"kind": "pubmed"},
)
def fetch_pubmed_drop(
    context: dg.OpExecutionContext,
    config: FetchWindow,
    pipeline: PipelineResource,
    pubmed: PubmedResource,
) -> dg.Output[int]:
    drops_dir = pipeline.settings().drops_dir
    window = f"{config.query!r} {config.since}..{config.until}"
    try:
        since, until = date.fromisoformat(config.since), date.fromisoformat(config.until)
        result = pubmed.fetch(config.query, since, until, drops_dir, config.batch_size)
    except (ValueError, PubmedFetchError, OSError) as exc:
        raise dg.Failure(
            description=f"PubMed fetch {window} failed, no drop written: {exc}",
            allow_retries=False,  # the client already retried transient errors with backoff
        ) from exc
    if result.path is None:
        context.log.info(f"no new PubMed records for {window}: no drop written (skipped)")
    else:
        context.log.info(f"{result.count} PubMed records for {window} -> {result.path.name}")
    return dg.Output(
        result.count,
        metadata={
            "records": result.count,
            "drop": result.path.name if result.path else "none (no new records)",
            "requests": result.requests,
            "retries": result.retries,
        },
    )


@dg.job(description="Fetch new PubMed records into the drops folder; the drop sensor ingests.")
def pubmed_fetch_job():
    fetch_pubmed_drop()
