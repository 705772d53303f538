"""The term cache of a test store: warming it, reading it, checking it (terms/audit.py)."""

from __future__ import annotations

from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.audit import audit, entries, fresh_list
from candlefire_pipeline_tests.backends.pg.terms.corpus import NAMES, VARIANTS, vectors

__all__ = ["differences", "fresh_list", "kept", "valid", "warm"]


def warm(store, n: int) -> None:
    """Keep every test text: keyword lists, entity lists, grounding."""
    store.substring_candidates(list(VARIANTS), vectors(VARIANTS), n)
    store.semantic_candidates(vectors(NAMES), n, stage="entities", texts=list(NAMES))
    store.ground_terms([[v] for v in VARIANTS])


def kept(store) -> list[dict]:
    """Every entry of the store's term cache, as dicts, oldest first."""
    return entries(store.conn, store.names)


def differences(store) -> list[str]:
    """Every way a kept entry differs from a fresh computation (empty: the cache is exact)."""
    report = audit(store)
    assert report.checked == len(kept(store))
    return report.differences


def valid(store) -> bool:
    content, cache = schema.versions(store.conn, store.names)
    return content == cache
