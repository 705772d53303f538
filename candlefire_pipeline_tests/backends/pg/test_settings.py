"""pgvector ANN settings: read from the environment, validated, carried to the store."""

from __future__ import annotations

from dataclasses import replace

import pytest

from candlefire_pipeline.backends.factory import build_backend, open_backend, pg_ann_params
from candlefire_pipeline.settings import PgAnnSettings, Settings

ENV = {
    "CANDLEFIRE_PG_VECTOR_TYPE": "HalfVec",
    "CANDLEFIRE_PG_QUANTIZATION": "none",
    "CANDLEFIRE_PG_RERANK_FACTOR": "7",
    "CANDLEFIRE_HNSW_EF_SEARCH": "150",
    "CANDLEFIRE_HNSW_EF_SEARCH_ENTITIES": "30",
    "CANDLEFIRE_HNSW_ITERATIVE_SCAN": "strict_order",
    "CANDLEFIRE_HNSW_MAX_SCAN_TUPLES": "5000",
}


def test_defaults_are_one_value_each(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    settings = Settings.from_env()
    assert settings.pg_ann == PgAnnSettings()
    assert (settings.hnsw_ef_search, settings.hnsw_ef_search_entities) == (1000, 1000)


def test_every_setting_is_read_from_the_environment(monkeypatch):
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env()
    assert settings.pg_ann == PgAnnSettings(
        vector_type="halfvec",
        quantization="none",
        rerank_factor=7,
        iterative_scan="strict_order",
        max_scan_tuples=5000,
    )
    assert (settings.hnsw_ef_search, settings.hnsw_ef_search_entities) == (150, 30)
    ann = pg_ann_params(settings)  # what the pgvector driver gets
    assert (ann.vector_type, ann.ef_search, ann.ef_search_entities) == ("halfvec", 150, 30)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("CANDLEFIRE_PG_VECTOR_TYPE", "float8", "must be one of vector, halfvec"),
        ("CANDLEFIRE_PG_QUANTIZATION", "pq", "must be one of none, binary"),
        ("CANDLEFIRE_HNSW_ITERATIVE_SCAN", "sometimes", "must be one of off, relaxed_order"),
        ("CANDLEFIRE_HNSW_EF_SEARCH", "0", "between 1 and 1,000,000"),
        ("CANDLEFIRE_HNSW_EF_SEARCH_ENTITIES", "-5", "between 1 and 1,000,000"),
        ("CANDLEFIRE_PG_RERANK_FACTOR", "many", "must be an integer"),
        ("CANDLEFIRE_HNSW_MAX_SCAN_TUPLES", "0", "between 1 and 1,000,000"),
    ],
)
def test_bad_values_name_the_variable(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=message) as caught:
        Settings.from_env()
    assert name in str(caught.value)


def test_the_factory_opens_the_configured_layout(tmp_path, pg_dsn):
    ann = PgAnnSettings(vector_type="halfvec")
    base = Settings.from_env().with_data_dir(tmp_path)
    settings = replace(
        base, pg_dsn=pg_dsn, pg_table="ann_factory", pg_ann=ann, hnsw_ef_search_entities=25
    )
    store = open_backend("pgvector", settings)
    try:
        assert store.ann == pg_ann_params(settings)
        assert (store.ann.vector_type, store.ann.ef_search_entities) == ("halfvec", 25)
        store.ensure_schema("test", 4)
        assert store.stored_layout().vector_type == "halfvec"
    finally:
        store.reset()
        store.close()


def test_settings_without_the_stage_efforts_are_refused_by_name(pg_dsn):
    with pytest.raises(TypeError, match="ann must be AnnParams .* got PgAnnSettings"):
        build_backend("pgvector", pg_dsn, table="ann_refused", ann=PgAnnSettings())
