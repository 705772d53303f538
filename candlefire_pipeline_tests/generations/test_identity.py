"""Generation identity: what changes the id, what does not, names and the registry record."""

from __future__ import annotations

from dataclasses import replace

import pytest

from candlefire_pipeline.embedding import embedding_identity
from candlefire_pipeline.generations.identity import (
    DROPPED,
    Generation,
    Identity,
    IndexLayout,
)

BASE = Identity("sentence-transformers/all-MiniLM-L6-v2", 384, "cf-1", IndexLayout())


def test_the_id_is_short_stable_and_derived_from_the_identity_only():
    assert BASE.gid == Identity(BASE.embedding_id, 384, "cf-1", IndexLayout()).gid
    assert len(BASE.gid) == 9 and BASE.gid.startswith("g")
    int(BASE.gid[1:], 16)  # hex


@pytest.mark.parametrize(
    "changed",
    [
        replace(BASE, embedding_id="sentence-transformers/all-MiniLM-L6-v2@onnx-int8"),
        replace(BASE, dim=768),
        replace(BASE, chunker="cf-2"),
        replace(BASE, layout=IndexLayout("halfvec")),
        replace(BASE, layout=IndexLayout(quantization="binary")),
        replace(BASE, layout=IndexLayout(hnsw_m=32)),
        replace(BASE, layout=IndexLayout(hnsw_ef_construction=128)),
    ],
    ids=["runtime-int8", "dim", "chunker", "halfvec", "binary", "hnsw-m", "hnsw-efc"],
)
def test_every_part_of_the_identity_changes_the_id(changed):
    assert changed.gid != BASE.gid


def test_fp32_runtimes_are_one_identity_and_int8_another():
    model = "sentence-transformers/all-MiniLM-L6-v2"
    ids = {
        runtime: embedding_identity(model, runtime) for runtime in ("torch", "onnx", "onnx-int8")
    }
    assert ids["torch"] == ids["onnx"] == model
    assert ids["onnx-int8"] == f"{model}@onnx-int8"


def test_same_vectors_tells_a_layout_change_from_a_model_or_chunker_change():
    assert BASE.same_vectors(replace(BASE, layout=IndexLayout("halfvec")))
    assert not BASE.same_vectors(replace(BASE, dim=768))
    assert not BASE.same_vectors(replace(BASE, chunker="cf-2"))


@pytest.mark.parametrize(
    "layout, expected",
    [("vector", ("vector", "none")), ("halfvec", ("halfvec", "none")),
     ("binary", ("vector", "binary")), ("halfvec-binary", ("halfvec", "binary"))],
)  # fmt: skip
def test_layout_names(layout, expected):
    named = IndexLayout.named(layout)
    assert (named.vector_type, named.quantization) == expected


@pytest.mark.parametrize(
    "kwargs, error",
    [({"vector_type": "float8"}, "vector type"), ({"quantization": "pq"}, "quantization"),
     ({"hnsw_m": 1}, "hnsw_m"), ({"hnsw_ef_construction": 5000}, "hnsw_ef_construction")],
)  # fmt: skip
def test_a_bad_layout_is_refused(kwargs, error):
    with pytest.raises(ValueError, match=error):
        IndexLayout(**kwargs)
    with pytest.raises(ValueError, match="layout must be one of"):
        IndexLayout.named("sparse")


@pytest.mark.parametrize("name", ["", "Int8", "8bit", "a-b", "x" * 25, "../etc", "a/b"])
def test_names_that_cannot_be_an_asset_key_prefix_are_refused(name):
    with pytest.raises(ValueError, match="generation name must match"):
        Generation(name, BASE, "m", "onnx")


def test_the_record_round_trips_and_a_hand_edited_identity_is_refused():
    generation = Generation("int8", BASE, "m", "onnx", created_at="t", created_by="me")
    data = generation.to_dict()
    assert data["gid"] == BASE.gid
    assert Generation.from_dict(data) == generation
    data["identity"]["dim"] = 768  # the id no longer matches what it names
    with pytest.raises(ValueError, match="does not match its identity"):
        Generation.from_dict(data)
    assert generation.with_state(DROPPED, dropped_at="t2").live is False


def test_note_served_records_the_time_and_never_fails(tmp_path, caplog):
    from candlefire_pipeline.generations.registry import Registry, stored_registry, write_registry
    from candlefire_pipeline.generations.served import note_served
    from candlefire_pipeline.settings import Settings

    settings = Settings(data_dir=tmp_path, drops_dir=tmp_path / "drops")
    note_served(settings, "int8")  # no registry: nothing to record, no error
    default = Generation("default", BASE, "m", "onnx", default=True)
    write_registry(settings, Registry((default, Generation("int8", BASE, "m", "onnx-int8")), True))
    note_served(settings, "int8")
    assert stored_registry(settings).get("int8").last_served_at is not None
    assert stored_registry(settings).get("default").last_served_at is None
    settings.generations_file.write_text("{broken")
    note_served(settings, "int8")
    assert "could not record when generation int8 last served" in caplog.text
