"""Settings read from the environment: which stores are fed, and the Qdrant location."""

from __future__ import annotations

import pytest

from candlefire_pipeline.settings import Settings, parse_stores
from candlefire_pipeline.stores import DEFAULT_STORES


@pytest.mark.parametrize(
    ("raw", "stores"),
    [
        (None, DEFAULT_STORES),
        ("pgvector,chroma,qdrant", ("pgvector", "chroma", "qdrant")),
        ("pgvector,chroma", ("pgvector", "chroma")),
        (" Qdrant , chroma,PGVECTOR ", ("pgvector", "chroma", "qdrant")),  # canonical order
        ("chroma,pgvector,", ("pgvector", "chroma")),
    ],
)
def test_stores_are_parsed_in_canonical_order(raw, stores):
    assert parse_stores(raw) == stores


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        ("pgvector,chroma,milvus", "unknown store.*milvus"),
        ("pgvector,chroma,chroma", "twice"),
        ("pgvector,qdrant", "must include pgvector, chroma.*missing: chroma"),
        ("", "missing: pgvector, chroma"),
        ("memory,pgvector,chroma", "unknown store.*memory"),  # the oracle is not a store
    ],
)
def test_bad_store_lists_are_clear_errors(raw, error):
    with pytest.raises(ValueError, match=error):
        parse_stores(raw)


def test_qdrant_settings_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    for name in ("CANDLEFIRE_STORES", "CANDLEFIRE_QDRANT_URL", "CANDLEFIRE_QDRANT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    local = Settings.from_env()
    assert local.stores == DEFAULT_STORES and local.qdrant_url is None
    assert local.qdrant_path == tmp_path / "qdrant"
    monkeypatch.setenv("CANDLEFIRE_STORES", "pgvector,chroma")
    monkeypatch.setenv("CANDLEFIRE_QDRANT_URL", "https://qdrant.internal:6333")
    monkeypatch.setenv("CANDLEFIRE_QDRANT_API_KEY", "k-123")
    monkeypatch.setenv("CANDLEFIRE_QDRANT_LOCK_TIMEOUT", "5")
    server = Settings.from_env()
    assert server.stores == ("pgvector", "chroma")
    assert (server.qdrant_url, server.qdrant_api_key) == ("https://qdrant.internal:6333", "k-123")
    assert server.qdrant_lock_timeout == 5.0 and "k-123" not in repr(server)
    monkeypatch.setenv("CANDLEFIRE_STORES", "pgvector")
    with pytest.raises(ValueError, match="CANDLEFIRE_STORES"):
        Settings.from_env()
