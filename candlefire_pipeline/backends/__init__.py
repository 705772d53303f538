"""Vector stores behind one protocol (base.VectorBackend): pgvector, chroma, memory.

The names below load with their module on first use (module `__getattr__`): importing one
driver, or the app's read path, does not load every store's code (and pyarrow with it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def __getattr__(name: str):
    if name == "BackendUnavailableError":
        from candlefire_pipeline.backends.common import BackendUnavailableError

        return BackendUnavailableError
    if name in __all__:
        from candlefire_pipeline.backends import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
