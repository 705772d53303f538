"""PubMed E-utilities (esearch + efetch) into one new drop file: client, parsing, drop writing."""

from candlefire_pipeline.corpus.pubmed.client import (
    EUTILS_BASE,
    MAX_ATTEMPTS,
    PubmedFetchError,
    Transport,
    redact,
    retry_after_seconds,
    urllib_transport,
)
from candlefire_pipeline.corpus.pubmed.fetch import (
    DATE_TYPES,
    EFETCH_BATCH,
    FetchResult,
    fetch_pubmed,
)

__all__ = [
    "DATE_TYPES",
    "EFETCH_BATCH",
    "EUTILS_BASE",
    "MAX_ATTEMPTS",
    "FetchResult",
    "PubmedFetchError",
    "Transport",
    "fetch_pubmed",
    "redact",
    "retry_after_seconds",
    "urllib_transport",
]
