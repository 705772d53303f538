"""Creating and listing generations on the real stores: migration, refusals, lag, sizes."""

from __future__ import annotations

import json

import pytest

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.generations.identity import IndexLayout
from candlefire_pipeline.generations.registry import GenerationError, stored_registry
from candlefire_pipeline.generations.view import batches_dir, generation_settings
from candlefire_pipeline.operations.generations.lifecycle import (
    create_generation,
    inspect_generations,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.generations.deployment import build, drop_tables
from candlefire_pipeline_tests.operations.batches import EMBEDDER, apply, paper, write_batch

KEYS = ("b1", "b2")


@pytest.fixture
def deployment(tmp_path, monkeypatch, pg_dsn) -> Settings:
    """Two drops in every store under the default generation (hashing-v1:16), no registry."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn, model=EMBEDDER.model_id)
    write_batch(settings.batches_dir, "b1", [paper("1"), paper("2", sections=2)])
    write_batch(settings.batches_dir, "b2", [paper("1", "v2"), paper("3")], deletes=["2"])
    for store in settings.stores:
        backend = open_backend(store, settings)
        try:
            for key in KEYS:
                apply(backend, settings.batches_dir, key)
        finally:
            backend.close()
    yield settings
    drop_tables(settings)


def test_without_a_registry_the_deployment_is_the_default_generation(deployment):
    [status] = inspect_generations(deployment)
    assert status.generation.default and status.generation.name == "default"
    assert status.generation.identity.embedding_id == "hashing-v1:16"
    assert status.role == "serving" and status.state == "ready"
    expected = len(expected_chunks(deployment.batches_dir))
    assert status.chunks == {store: expected for store in deployment.stores}
    assert status.lag == {store: 0 for store in deployment.stores}
    assert not deployment.generations_file.exists()  # reading never writes


def test_create_freezes_the_default_then_the_new_one_builds_beside_it(deployment):
    created = create_generation(
        deployment, "dim32", "hashing-v1:32", layout=IndexLayout("halfvec"), actor="tester"
    )
    assert (created.identity.dim, created.identity.embedding_id) == (32, "hashing-v1:32")
    registry = json.loads(deployment.generations_file.read_text())
    assert [g["name"] for g in registry["generations"]] == ["default", "dim32"]
    assert registry["generations"][0]["identity"]["dim"] == 16  # frozen as the stores hold it
    default, building = inspect_generations(deployment)
    assert building.state == "building" and building.role == ""
    assert building.lag == {store: 2 for store in deployment.stores}
    assert building.chunks == {store: 0 for store in deployment.stores}
    build(deployment, created, list(KEYS))
    default, ready = inspect_generations(deployment)
    assert ready.state == "ready" and ready.lag == {store: 0 for store in deployment.stores}
    assert ready.chunks == default.chunks  # same chunker: the same chunks, other vectors
    for store in deployment.stores:
        backend = open_backend(store, generation_settings(deployment, created))
        try:
            assert backend.stored_model() == ("hashing-v1:32", 32)
            assert backend.chunk_hashes() == expected_chunks(batches_dir(deployment, created))
        finally:
            backend.close()
        assert ready.bytes[store] > 0
    # the default generation was not touched
    backend = open_backend("pgvector", deployment)
    assert backend.stored_model() == ("hashing-v1:16", 16)
    backend.close()


@pytest.mark.parametrize(
    "name, model, kwargs, error",
    [
        ("default", "hashing-v1:32", {}, "a generation named 'default' exists"),
        ("same", "hashing-v1:16", {}, "already has this identity"),
        ("Bad-Name", "hashing-v1:32", {}, "generation name must match"),
        ("chunky", "hashing-v1:32", {"chunker_version": "cf-9"}, "unknown chunker"),
        ("fast", "hashing-v1:32", {"runtime": "tensorrt"}, "runtime must be one of"),
    ],
)
def test_refusals_write_nothing(deployment, name, model, kwargs, error):
    # the default's layout and model: "same" has exactly its identity
    with pytest.raises((GenerationError, ValueError), match=error):
        create_generation(deployment, name, model, **kwargs)
    registry = stored_registry(deployment)
    assert registry is None or [g.name for g in registry.generations] == ["default"]


def test_freezing_refuses_a_default_the_stores_do_not_hold(deployment, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1:24")  # not what the stores hold
    with pytest.raises(GenerationError, match="holds hashing-v1:16 .* settings describe"):
        create_generation(Settings.from_env(), "dim32", "hashing-v1:32")
    assert not deployment.generations_file.exists()


def test_the_cli_creates_and_lists(deployment, capsys):
    assert candlefire(["generation", "create", "int", "--model", "hashing-v1:8",
                       "--layout", "binary", "--by", "ops"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "generation int [g" in out and "vector+binary" in out and "reload" in out
    assert candlefire(["generation", "list"]) == 0
    out = capsys.readouterr().out
    assert "default (default) [g" in out and "ready, serving" in out
    assert "int [g" in out and "building" in out and "2 drops behind" in out
    assert candlefire(["generation", "create", "int", "--model", "hashing-v1:8"]) == 1
    assert "names are never reused" in capsys.readouterr().err


def test_list_warns_when_the_environment_no_longer_describes_the_frozen_default(
    deployment, monkeypatch, capsys
):
    create_generation(deployment, "dim32", "hashing-v1:32")
    assert candlefire(["generation", "list"]) == 0
    assert "warning" not in capsys.readouterr().err
    monkeypatch.setenv("CANDLEFIRE_PG_VECTOR_TYPE", "halfvec")
    assert candlefire(["generation", "list"]) == 0
    err = capsys.readouterr().err
    assert "warning: the environment describes hashing-v1:16 (16-dim), chunker cf-1, halfvec" in err
    assert "the registry wins" in err
    # the default generation's targets are read as frozen, not as the environment says
    [default, _] = inspect_generations(Settings.from_env())
    assert default.chunks["pgvector"] == len(expected_chunks(deployment.batches_dir))


def test_query_reads_a_generation_before_it_serves(deployment, capsys):
    created = create_generation(deployment, "dim32", "hashing-v1:32")
    assert candlefire(["query", "abstract of 3", "--backend", "pgvector", "--generation",
                       "dim32"]) == 0  # fmt: skip
    assert "#  PMID" in capsys.readouterr().out  # the header: nothing built yet, no rows
    build(deployment, created, list(KEYS))
    assert candlefire(["query", "v1 abstract of 3 about SOD1", "--backend", "pgvector",
                       "--generation", "dim32"]) == 0  # fmt: skip
    assert " 3 " in capsys.readouterr().out
    assert candlefire(["query", "x", "--generation", "dim32"]) == 2
    assert "--generation needs --backend" in capsys.readouterr().err
