"""Settings of the embedding executor and of Ray: defaults, accepted values, clear errors."""

from __future__ import annotations

import pytest

from candlefire_pipeline.settings import RaySettings, Settings

RAY_VARS = (
    "CANDLEFIRE_EMBED_EXECUTOR", "RAY_ADDRESS", "CANDLEFIRE_RAY_ACTORS",
    "CANDLEFIRE_RAY_CPUS_PER_ACTOR", "CANDLEFIRE_RAY_SLICE_TEXTS", "CANDLEFIRE_RAY_MAX_RETRIES",
    "CANDLEFIRE_RAY_CONNECT_TIMEOUT", "CANDLEFIRE_RAY_STARTUP_TIMEOUT",
    "CANDLEFIRE_BACKFILL_PARTITIONS_PER_RUN",
)  # fmt: skip


@pytest.fixture
def env(monkeypatch):
    for name in RAY_VARS:
        monkeypatch.delenv(name, raising=False)

    def set_env(**values: str) -> Settings:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
        return Settings.from_env()

    return set_env


def test_in_process_is_the_default_and_needs_no_ray(env):
    settings = env()
    assert settings.embed_executor == "in_process"
    assert settings.ray == RaySettings()
    assert settings.backfill_partitions_per_run == 10


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"RAY_ADDRESS": "10.1.2.3:6379"}, RaySettings(address="10.1.2.3:6379")),
        ({"RAY_ADDRESS": "ray://head:10001"}, RaySettings(address="ray://head:10001")),
        ({"RAY_ADDRESS": "[::1]:6379"}, RaySettings(address="[::1]:6379")),
        (
            {
                "RAY_ADDRESS": "head:6379",
                "CANDLEFIRE_RAY_ACTORS": "8",
                "CANDLEFIRE_RAY_CPUS_PER_ACTOR": "0.5",
                "CANDLEFIRE_RAY_SLICE_TEXTS": "256",
                "CANDLEFIRE_RAY_MAX_RETRIES": "0",
                "CANDLEFIRE_RAY_STARTUP_TIMEOUT": "30",
            },
            RaySettings(
                address="head:6379",
                actors=8,
                cpus_per_actor=0.5,
                slice_texts=256,
                max_retries=0,
                startup_timeout_s=30.0,
            ),  # fmt: skip
        ),
    ],
)
def test_ray_executor_settings(env, values, expected):
    settings = env(CANDLEFIRE_EMBED_EXECUTOR="RAY", **values)
    assert (settings.embed_executor, settings.ray) == ("ray", expected)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"CANDLEFIRE_EMBED_EXECUTOR": "dask"}, "CANDLEFIRE_EMBED_EXECUTOR must be one of"),
        ({"CANDLEFIRE_EMBED_EXECUTOR": "ray"}, "needs RAY_ADDRESS"),
        ({"RAY_ADDRESS": "auto"}, "RAY_ADDRESS must be 'host:port'"),
        ({"RAY_ADDRESS": "head"}, "RAY_ADDRESS must be 'host:port'"),
        ({"RAY_ADDRESS": "head:70000"}, "RAY_ADDRESS must be 'host:port'"),
        ({"RAY_ADDRESS": ":6379"}, "RAY_ADDRESS must be 'host:port'"),
        ({"CANDLEFIRE_RAY_ACTORS": "0"}, "CANDLEFIRE_RAY_ACTORS must be >= 1"),
        ({"CANDLEFIRE_RAY_ACTORS": "two"}, "CANDLEFIRE_RAY_ACTORS must be an integer"),
        ({"CANDLEFIRE_RAY_CPUS_PER_ACTOR": "0"}, "CANDLEFIRE_RAY_CPUS_PER_ACTOR must be > 0"),
        ({"CANDLEFIRE_RAY_SLICE_TEXTS": "-1"}, "CANDLEFIRE_RAY_SLICE_TEXTS must be >= 1"),
        ({"CANDLEFIRE_RAY_MAX_RETRIES": "-1"}, "CANDLEFIRE_RAY_MAX_RETRIES must be >= 0"),
        (
            {"CANDLEFIRE_BACKFILL_PARTITIONS_PER_RUN": "0"},
            "CANDLEFIRE_BACKFILL_PARTITIONS_PER_RUN must be >= 1",
        ),
    ],
)
def test_bad_values_are_refused_with_the_variable_named(env, values, message):
    with pytest.raises(ValueError, match=message):
        env(**values)


@pytest.mark.parametrize(
    ("values", "read_batch"),
    [
        ({}, 1024),
        ({"CANDLEFIRE_EMBED_EXECUTOR": "ray", "RAY_ADDRESS": "h:1"}, 1024),
        (
            {
                "CANDLEFIRE_EMBED_EXECUTOR": "ray",
                "RAY_ADDRESS": "h:1",
                "CANDLEFIRE_RAY_ACTORS": "64",
            },
            64 * 128,
        ),
        ({"RAY_ADDRESS": "h:1", "CANDLEFIRE_RAY_ACTORS": "64"}, 1024),  # in-process: unchanged
    ],
)
def test_the_stage_reads_enough_rows_per_call_to_feed_every_actor(env, values, read_batch):
    from candlefire_pipeline.embedding.executor import stage_read_batch

    assert stage_read_batch(env(**values)) == read_batch
