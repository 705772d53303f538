"""Gate thresholds are validated where the environment is read; every setting has one default."""

from __future__ import annotations

import inspect
import os

import pytest

from candlefire_pipeline.backends.factory import backend_class, pg_ann_params
from candlefire_pipeline.backends.pg.layout import AnnParams
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.operations.serving.machine import read_state
from candlefire_pipeline.settings import (
    THRESHOLD_RANGES,
    ParityThresholds,
    Settings,
    executor_mode,
)

OUT_OF_RANGE = [
    ("CANDLEFIRE_PARITY_MEAN_OVERLAP", "0"),  # would pass any overlap
    ("CANDLEFIRE_PARITY_MEAN_OVERLAP", "1.01"),  # could never pass
    ("CANDLEFIRE_PARITY_P95_RATIO", "1000"),  # would switch the latency gate off
    ("CANDLEFIRE_PARITY_P95_RATIO", "inf"),
    ("CANDLEFIRE_PARITY_GROUNDING", "0.5"),
    ("CANDLEFIRE_PARITY_GROUNDING", "nan"),
    ("CANDLEFIRE_PARITY_ANN_RECALL", "0.1"),
    ("CANDLEFIRE_PARITY_MIN_CHUNKS", "0"),  # an empty corpus would count as evidence
    ("CANDLEFIRE_PARITY_MIN_QUERIES", "0"),
    ("CANDLEFIRE_PARITY_MIN_QUERIES", "-3"),
    ("CANDLEFIRE_PARITY_MIN_SHADOW_QUERIES", "-1"),
    ("CANDLEFIRE_PARITY_SHADOW_ERROR_RATE", "0.5"),  # would accept half the reads failing
]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for variable, _, _ in THRESHOLD_RANGES.values():
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv("CANDLEFIRE_PG_DSN", raising=False)
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
    return monkeypatch


def test_defaults_are_in_range_and_every_gate_has_a_variable(clean_env):
    assert Settings.from_env().parity == ParityThresholds()
    assert set(THRESHOLD_RANGES) == set(ParityThresholds.__dataclass_fields__)


@pytest.mark.parametrize("variable, value", OUT_OF_RANGE)
def test_out_of_range_threshold_is_a_clear_error_naming_the_variable(clean_env, variable, value):
    clean_env.setenv(variable, value)
    with pytest.raises(ValueError, match=f"^{variable} .*must be between"):
        Settings.from_env()


@pytest.mark.parametrize("variable", [v for v, _, _ in THRESHOLD_RANGES.values()])
def test_both_ends_of_each_range_are_accepted(clean_env, variable):
    low, high = next((lo, hi) for v, lo, hi in THRESHOLD_RANGES.values() if v == variable)
    for value in (low, high):
        clean_env.setenv(variable, str(value))
        Settings.from_env()  # no error


def test_not_a_number_names_the_variable(clean_env):
    clean_env.setenv("CANDLEFIRE_PARITY_MIN_CHUNKS", "lots")
    with pytest.raises(ValueError, match="CANDLEFIRE_PARITY_MIN_CHUNKS must be an integer"):
        Settings.from_env()


def test_thresholds_built_in_code_are_checked_too():
    with pytest.raises(ValueError, match="CANDLEFIRE_PARITY_P95_RATIO"):
        ParityThresholds(p95_ratio=50.0)


def test_the_cli_reports_the_bad_variable_and_rollback_still_works(clean_env, capsys):
    clean_env.setenv("CANDLEFIRE_PARITY_P95_RATIO", "1000")
    assert candlefire(["status"]) == 2
    assert "CANDLEFIRE_PARITY_P95_RATIO" in capsys.readouterr().err
    clean_env.setenv("CANDLEFIRE_PG_DSN", "postgresql://u@127.0.0.1:9/x")  # nothing listens
    assert candlefire(["rollback", "--reason", "bad threshold must not block a rollback"]) == 0
    settings = Settings.from_env(parity=False)
    assert read_state(settings.serving_file).pinned


def test_serving_override_is_validated(clean_env):
    clean_env.setenv("CANDLEFIRE_SERVING_BACKEND", "qdrant")
    with pytest.raises(ValueError, match="CANDLEFIRE_SERVING_BACKEND"):
        Settings.from_env()
    clean_env.setenv("CANDLEFIRE_SERVING_BACKEND", "Chroma")
    assert Settings.from_env().serving_override == "chroma"


def test_an_unset_environment_gives_exactly_the_dataclass_defaults(monkeypatch, tmp_path):
    for variable in [v for v in os.environ if v.startswith(("CANDLEFIRE_", "RAY_", "NCBI_"))]:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    read = Settings.from_env()
    assert read == Settings(data_dir=read.data_dir, drops_dir=read.data_dir / "drops")


@pytest.mark.parametrize(
    ("name", "parameter", "default"),
    [
        ("pgvector", "hnsw_m", Settings.hnsw_m),
        ("pgvector", "hnsw_ef_construction", Settings.hnsw_ef_construction),
        ("pgvector", "table", Settings.pg_table),
        ("pgvector", "substring_mode", Settings.substring_mode),
        ("qdrant", "hnsw_m", Settings.hnsw_m),
        ("qdrant", "hnsw_ef_construction", Settings.hnsw_ef_construction),
        ("qdrant", "ef_search", Settings.hnsw_ef_search),
        ("qdrant", "lock_timeout", Settings.qdrant_lock_timeout),
        ("qdrant", "collection", Settings.qdrant_collection),
        ("qdrant", "substring_mode", Settings.substring_mode),
        ("chroma", "port", Settings.chroma_port),
        ("chroma", "collection", Settings.chroma_collection),
        ("chroma", "substring_mode", Settings.substring_mode),
        ("memory", "substring_mode", Settings.substring_mode),
    ],
)
def test_a_backend_built_without_settings_has_the_settings_defaults(name, parameter, default):
    """Drivers keep their own defaults (they never read the app's settings); these must agree."""
    signature = inspect.signature(backend_class(name))
    assert signature.parameters[parameter].default == default


def test_the_pg_drivers_ann_defaults_are_the_settings_defaults(tmp_path):
    assert AnnParams() == pg_ann_params(Settings(tmp_path, tmp_path / "drops"))


@pytest.mark.parametrize(
    ("variable", "bad", "good", "read"),
    [
        ("CANDLEFIRE_SUBSTRING_MODE", "glob", "ILIKE", lambda: Settings.from_env().substring_mode),
        ("CANDLEFIRE_SERVING_BACKEND", "qdrant", "Chroma",
         lambda: Settings.from_env().serving_override),
        ("CANDLEFIRE_RUN_EXECUTOR", "celery", "multiprocess", lambda: executor_mode()[0]),
        ("CANDLEFIRE_EMBED_EXECUTOR", "dask", "In_Process",
         lambda: Settings.from_env().embed_executor),
        ("CANDLEFIRE_EMBED_RUNTIME", "tensorrt", "Torch",
         lambda: Settings.from_env().embed_runtime_query),
        ("CANDLEFIRE_PG_QUANTIZATION", "pq", "BINARY",
         lambda: Settings.from_env().pg_ann.quantization),
    ],
)  # fmt: skip
def test_every_choice_setting_names_its_choices_and_ignores_case(
    monkeypatch, variable, bad, good, read
):
    """One helper (settings/env.py: env_choice / check_choice) reads every choice setting."""
    monkeypatch.setenv(variable, bad)
    with pytest.raises(ValueError, match=rf"^{variable} must be one of .*, got '{bad}'$"):
        read()
    monkeypatch.setenv(variable, good)
    assert read() == good.lower()


def test_a_choice_outside_the_environment_is_checked_the_same_way():
    with pytest.raises(ValueError, match="^embedding path must be one of query, bulk, got 'x'$"):
        Settings.from_env().embed_runtime("x")
