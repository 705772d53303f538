"""gc: what is kept and why, what a drop removes, and a promotion racing a drop."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta

import pytest

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.definitions import build_definitions
from candlefire_pipeline.generations.registry import stored_registry
from candlefire_pipeline.generations.view import batches_dir, generation_settings
from candlefire_pipeline.operations.generations.gc import apply_gc, plan_gc
from candlefire_pipeline.operations.generations.lifecycle import (
    create_generation,
    inspect_generations,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.generations.deployment import build, deploy, drop_tables

LATER = datetime.now(UTC) + timedelta(days=30)


@pytest.fixture
def three(tmp_path, monkeypatch, pg_dsn):
    """default + old_a + old_b, both built (every store holds them)."""
    settings = deploy(monkeypatch, tmp_path, pg_dsn)
    for name, model in (("old_a", "hashing-v1:40"), ("old_b", "hashing-v1:48")):
        build(settings, create_generation(settings, name, model))
    yield settings
    drop_tables(settings)


def switch(settings: Settings, generation: str, previous: str) -> None:
    settings.serving_file.write_text(json.dumps({
        "backend": "pgvector", "state": "pgvector", "generation": generation,
        "previous": {"backend": "pgvector", "generation": previous},
    }))  # fmt: skip


def chroma_collections(settings: Settings) -> set[str]:
    """Collection names in the local Chroma folder, read from its catalog (no second client)."""
    database = settings.chroma_path / "chroma.sqlite3"
    with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM collections")}


def names(pairs) -> dict[str, str]:
    return {generation.name: why for generation, why in pairs}


def test_the_dry_run_keeps_serving_rollback_target_default_and_young_ones(three):
    assert names(plan_gc(three, 7).drop) == {}  # all younger than 7 days
    kept = names(plan_gc(three, 7).keep)
    assert "default generation" in kept["default"] and "younger than 7 days" in kept["old_a"]
    switch(three, "old_b", "old_a")
    plan = plan_gc(three, 7, now=LATER)
    assert names(plan.drop) == {}
    assert names(plan.keep) == {
        "default": "the default generation (the pipeline's own assets feed it)",
        "old_a": "the rollback target", "old_b": "serving",
    }  # fmt: skip
    switch(three, "old_b", "default")
    assert list(names(plan_gc(three, 7, now=LATER).drop)) == ["old_a"]
    assert stored_registry(three).get("old_a").live  # a dry run writes nothing


def test_apply_drops_every_target_and_the_files_and_the_location_forgets_it(three):
    switch(three, "default", "default")
    old_a = stored_registry(three).get("old_a")
    view = generation_settings(three, old_a)
    said: list[str] = []
    dropped = apply_gc(three, plan_gc(three, 0), said.append)
    assert sorted(dropped) == ["old_a", "old_b"]
    assert not batches_dir(three, old_a).exists()
    registry = stored_registry(three)
    assert registry.get("old_a").state == "dropped" and registry.get("old_a").dropped_at
    backend = open_backend("pgvector", view)
    assert backend.stored_model() is None and backend.count() == 0
    backend.close()
    assert view.chroma_collection not in chroma_collections(three)
    assert three.chroma_collection in chroma_collections(three)
    backend = open_backend("qdrant", view)
    assert backend.stored_model() is None
    backend.close()
    keys = {k.to_user_string() for k in build_definitions(Settings.from_env())
            .resolve_asset_graph().get_all_asset_keys()}  # fmt: skip
    assert not any(k.startswith(("old_a/", "old_b/")) for k in keys)
    states = {s.generation.name: s.state for s in inspect_generations(three)}
    assert states == {"default": "ready", "old_a": "dropped", "old_b": "dropped"}
    assert apply_gc(three, plan_gc(three, 0), said.append) == []  # nothing left to do


def test_a_generation_promoted_after_the_plan_is_kept(three):
    switch(three, "default", "default")
    plan = plan_gc(three, 0)
    switch(three, "old_a", "default")  # a promotion between the dry run and the apply
    assert apply_gc(three, plan, lambda _: None) == ["old_b"]
    assert stored_registry(three).get("old_a").live


def test_an_interrupted_drop_is_finished(three, monkeypatch):
    from candlefire_pipeline.operations.generations import gc as generation_gc

    switch(three, "default", "default")

    def crash(*args):
        raise RuntimeError("killed mid-drop")

    monkeypatch.setattr(generation_gc, "drop_targets", crash)
    with pytest.raises(RuntimeError):
        apply_gc(three, plan_gc(three, 0), lambda _: None)
    assert stored_registry(three).get("old_a").state == "dropping"
    monkeypatch.undo()
    plan = plan_gc(three, 1000)  # retention no longer matters: it was already being dropped
    assert names(plan.drop) == {"old_a": "an interrupted drop to finish"}
    assert apply_gc(three, plan, lambda _: None) == ["old_a"]


def test_the_cli_is_a_dry_run_unless_apply(three, capsys):
    switch(three, "default", "default")
    assert candlefire(["generation", "gc", "--retention-days", "0"]) == 0
    out = capsys.readouterr().out
    assert "would drop old_a" in out and "dry run" in out and "keeping default" in out
    assert stored_registry(three).get("old_a").live
    assert candlefire(["generation", "gc", "--retention-days", "0", "--apply"]) == 0
    assert "dropped: old_a, old_b" in capsys.readouterr().out
