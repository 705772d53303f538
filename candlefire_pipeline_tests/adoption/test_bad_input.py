"""An app collection that cannot be adopted as it is: a clear error naming it, and nothing written
anywhere (no ledger batch, no store row, no staging, no snapshot, the app's folder untouched)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import chromadb
import numpy as np
import pytest
from chromadb.config import Settings as ChromaSettings

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.adoption.importer import run_import
from candlefire_pipeline.operations.adoption.report import build_report
from candlefire_pipeline.operations.adoption.source import AdoptionError
from candlefire_pipeline_tests.adoption import scenario
from candlefire_pipeline_tests.adoption.app_indexer import COLLECTION, app_chunks

GOOD = {"pmid": "B1", "title": "t", "year": 2020, "doi": "", "citation_count": 1,
        "entity_names": "SOD1", "mesh_terms": "ALS", "has_full_text": 0, "section": "abstract",
        "chunk_index": 0}  # fmt: skip


def _collection(folder: Path, metadata: dict, space: str = "cosine", dim: int = 16) -> Path:
    client = chromadb.PersistentClient(
        str(folder), settings=ChromaSettings(anonymized_telemetry=False)
    )
    target = client.create_collection(COLLECTION, metadata={"hnsw:space": space},
                                      embedding_function=None)  # fmt: skip
    chunk = app_chunks(scenario.corpus_v1()[0])[0]
    target.add(ids=["B1"], documents=[chunk["document"]], metadatas=[metadata],
               embeddings=np.ones((1, dim), np.float32))  # fmt: skip
    client.close()
    return folder


def _corrupt(folder: Path) -> Path:
    _collection(folder, GOOD)
    with (folder / "chroma.sqlite3").open("r+b") as handle:
        handle.write(b"not a database" * 64)
    return folder


def _not_chroma(folder: Path) -> Path:
    folder.mkdir()
    (folder / "notes.txt").write_text("not a Chroma folder")
    return folder


CASES = {
    "missing folder": (lambda f: f, "does not exist"),
    "not a Chroma folder": (_not_chroma, r"is not a Chroma folder \(no chroma.sqlite3\)"),
    "corrupted SQLite": (_corrupt, "cannot be opened"),
    "another collection name": (lambda f: _collection(f, GOOD), "has no collection 'als_papers'"),
    "L2 space": (lambda f: _collection(f, GOOD, space="l2"), "measures 'l2' distance"),
    "non-scalar metadata": (lambda f: _collection(f, {**GOOD, "entity_names": ["SOD1"]}),
                            "'B1': metadata 'entity_names' is not a scalar"),
    "missing metadata key": (lambda f: _collection(f, {k: v for k, v in GOOD.items()
                                                      if k != "section"}),
                             "'B1': metadata lacks section"),
    "wrong metadata type": (lambda f: _collection(f, {**GOOD, "chunk_index": "0"}),
                            "metadata 'chunk_index' is str"),
    "another dimension": (lambda f: _collection(f, GOOD, dim=24), "24 dimensions"),
}  # fmt: skip


def _checksum(folder: Path) -> str | None:
    return scenario.folder_checksum(folder) if folder.exists() else None


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("verb", ["report", "import"])
def test_bad_app_collections_are_refused_by_name_with_nothing_written(tmp_path, pg_dsn, case, verb):
    make, message = CASES[case]
    deployment = scenario.deployment(tmp_path, pg_dsn)
    folder = make(tmp_path / "bad-app")
    app = replace(deployment.settings.app_collection, path=folder)
    if case == "another collection name":
        app = replace(app, collection="nope_papers")
        message = "has no collection 'nope_papers'.*it holds: als_papers"
    settings = replace(deployment.settings, app_collection=app)
    before = _checksum(folder)
    embedder = embedder_for(settings, "bulk")
    run = build_report if verb == "report" else run_import
    if verb == "report" and case == "another dimension":
        report, _ = run(settings, embedder)  # reported, not an error: its model check says so
        assert report.model["verdict"] == "other_dimension"
        assert "24 dimensions" in report.model["summary"]
        return
    with pytest.raises(AdoptionError, match=message):
        run(settings, embedder)
    assert _checksum(folder) == before
    assert not list(settings.batches_dir.glob("*")) if settings.batches_dir.exists() else True
    assert not list(settings.adoption_dir.glob("staging/*.sqlite3"))
    assert not list(settings.adoption_dir.glob("snapshots/snapshot-*"))
    with opened_backend("pgvector", settings) as store:
        assert store.count() == 0
