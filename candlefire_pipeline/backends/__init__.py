"""Vector stores behind one protocol (base.VectorBackend): pgvector, chroma, memory."""

from candlefire_pipeline.backends.base import (
    RESULT_FIELDS,
    DimensionMismatchError,
    Filter,
    ResultRow,
    VectorBackend,
)
from candlefire_pipeline.backends.common import BackendUnavailableError

__all__ = [
    "RESULT_FIELDS",
    "BackendUnavailableError",
    "DimensionMismatchError",
    "Filter",
    "ResultRow",
    "VectorBackend",
]
