"""The embedding section of settings: per-path runtimes, ONNX cache, progress interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from candlefire_pipeline.settings import (
    DEFAULT_BULK_RUNTIME,
    DEFAULT_QUERY_RUNTIME,
    EMBED_RUNTIMES,
    Settings,
)

VARIABLES = (
    "CANDLEFIRE_EMBED_RUNTIME",
    "CANDLEFIRE_EMBED_RUNTIME_QUERY",
    "CANDLEFIRE_EMBED_RUNTIME_BULK",
    "CANDLEFIRE_ONNX_DIR",
    "CANDLEFIRE_EMBED_BATCH",
    "CANDLEFIRE_EMBED_PROGRESS_SECONDS",
)


@pytest.fixture
def env(monkeypatch, tmp_path):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def apply(**values: str) -> Settings:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        return Settings.from_env()

    return apply


def test_defaults_are_the_measured_runtimes(env, tmp_path):
    settings = env()
    assert settings.embed_runtime("query") == DEFAULT_QUERY_RUNTIME
    assert settings.embed_runtime("bulk") == DEFAULT_BULK_RUNTIME
    assert settings.onnx_dir == tmp_path / "data" / "cache" / "onnx"
    assert settings.embed_progress_seconds == 10.0


@pytest.mark.parametrize(
    ("values", "query", "bulk"),
    [
        ({"CANDLEFIRE_EMBED_RUNTIME": "torch"}, "torch", "torch"),
        ({"CANDLEFIRE_EMBED_RUNTIME": " ONNX-int8 "}, "onnx-int8", "onnx-int8"),
        ({"CANDLEFIRE_EMBED_RUNTIME": "torch", "CANDLEFIRE_EMBED_RUNTIME_QUERY": "onnx"},
         "onnx", "torch"),
        ({"CANDLEFIRE_EMBED_RUNTIME_BULK": "torch"}, DEFAULT_QUERY_RUNTIME, "torch"),
        ({"CANDLEFIRE_EMBED_RUNTIME_QUERY": "torch", "CANDLEFIRE_EMBED_RUNTIME_BULK": "onnx"},
         "torch", "onnx"),
    ],
)  # fmt: skip
def test_one_variable_for_both_paths_and_one_per_path(env, values, query, bulk):
    settings = env(**values)
    assert (settings.embed_runtime_query, settings.embed_runtime_bulk) == (query, bulk)


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"CANDLEFIRE_EMBED_RUNTIME": "tensorrt"}, "CANDLEFIRE_EMBED_RUNTIME must be one of"),
        ({"CANDLEFIRE_EMBED_RUNTIME_QUERY": "gpu"}, "CANDLEFIRE_EMBED_RUNTIME_QUERY must be"),
        ({"CANDLEFIRE_EMBED_RUNTIME_BULK": "int8"}, "CANDLEFIRE_EMBED_RUNTIME_BULK must be"),
        ({"CANDLEFIRE_EMBED_RUNTIME_QUERY": "onnx-int8", "CANDLEFIRE_EMBED_RUNTIME_BULK": "torch"},
         "CANDLEFIRE_EMBED_RUNTIME_QUERY \\(onnx-int8\\) and CANDLEFIRE_EMBED_RUNTIME_BULK"),
        ({"CANDLEFIRE_EMBED_RUNTIME": "onnx-int8", "CANDLEFIRE_EMBED_RUNTIME_BULK": "onnx"},
         "make different vectors"),
        ({"CANDLEFIRE_EMBED_BATCH": "0"}, "CANDLEFIRE_EMBED_BATCH must be a positive integer"),
        ({"CANDLEFIRE_EMBED_BATCH": "many"}, "CANDLEFIRE_EMBED_BATCH must be an integer"),
        ({"CANDLEFIRE_EMBED_PROGRESS_SECONDS": "0"}, "CANDLEFIRE_EMBED_PROGRESS_SECONDS must be"),
        ({"CANDLEFIRE_EMBED_PROGRESS_SECONDS": "soon"}, "CANDLEFIRE_EMBED_PROGRESS_SECONDS must"),
    ],
)  # fmt: skip
def test_a_bad_value_names_its_variable(env, values, named):
    with pytest.raises(ValueError, match=named):
        env(**values)


def test_every_runtime_is_accepted(env):
    for runtime in EMBED_RUNTIMES:
        assert env(CANDLEFIRE_EMBED_RUNTIME=runtime).embed_runtime("bulk") == runtime


def test_the_onnx_cache_can_live_elsewhere(env, tmp_path):
    settings = env(CANDLEFIRE_ONNX_DIR=str(tmp_path / "shared-onnx"))
    assert settings.onnx_dir == Path(tmp_path / "shared-onnx")
    assert settings.with_data_dir(tmp_path / "other").onnx_dir == tmp_path / "shared-onnx"


def test_an_unknown_path_is_refused(env):
    with pytest.raises(ValueError, match="embedding path"):
        env().embed_runtime("serving")
