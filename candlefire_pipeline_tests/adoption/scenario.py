"""The adoption scenario: the app's collection built from version 1 of a corpus by candle-fire's
indexing rules, re-run on version 2 (it adds only new ids); the pipeline fed both versions as
drops. What each paper becomes:

- A1 abstract-only, unchanged: identical
- A2 gains full text in v2: the app keeps its bare-pmid chunk beside the new section chunks
- A3 deleted by drop 2: the app keeps it
- A4 abstract changed in v2: the app keeps the old text
- A5 citation count changed in v2: the app keeps the old metadata
- A6 unchanged, but the app's vector of it came from another model version (drift)
- A7 new in v2: indexed by the app too
- A8 only in drop 2 (the app never saw it)
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.adoption.app_indexer import index_papers
from candlefire_pipeline_tests.operations.batches import EMBEDDER, paper, write_batch

DRIFTED = "A6"


def corpus_v1() -> list[dict]:
    return [paper(f"A{i}", entity_names=["SOD1"], mesh_terms=["ALS", "Motor Neuron"])
            for i in range(1, 7)]  # fmt: skip


def corpus_v2() -> list[dict]:
    v1 = {p["pmid"]: p for p in corpus_v1()}
    v2 = dict(v1)
    del v2["A3"]
    v2["A2"] = paper("A2", sections=2, entity_names=["SOD1"], mesh_terms=["ALS", "Motor Neuron"])
    v2["A4"] = v1["A4"] | {"abstract": "v2 abstract of A4, now about TDP-43"}
    v2["A5"] = v1["A5"] | {"citation_count": 9}
    v2["A7"] = paper("A7", entity_names=["C9orf72"])
    return list(v2.values())


def app_embed(texts: list[str]) -> np.ndarray:
    """The app's embedding function: the pipeline's model, but A6's chunk drifted."""
    vectors = EMBEDDER.embed(texts)
    for i, text in enumerate(texts):
        if "of A6" in text:
            seed = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)
            vectors[i] = np.random.default_rng(seed).standard_normal(vectors.shape[1])
            vectors[i] /= np.linalg.norm(vectors[i])
    return vectors


def build_app_folder(folder: Path) -> Path:
    index_papers(folder, corpus_v1(), app_embed)
    index_papers(folder, corpus_v2(), app_embed)
    return folder


def write_drops(settings: Settings) -> list[str]:
    """Drop 1 = v1, drop 2 = v2's changes, A3's delete and A8 (batch files; not applied)."""
    write_batch(settings.batches_dir, "drop-1", corpus_v1())
    v2 = {p["pmid"]: p for p in corpus_v2()}
    changed = [v2[k] for k in ("A2", "A4", "A5", "A7")] + [paper("A8")]
    write_batch(settings.batches_dir, "drop-2a", changed)
    # a delete travels as MEDLINE XML, which holds abstract-only records
    write_batch(settings.batches_dir, "drop-2b", [paper("A9")], deletes=["A3"])
    return ["drop-1", "drop-2a", "drop-2b"]


@dataclass(frozen=True)
class Deployment:
    settings: Settings
    app_folder: Path


def deployment(root: Path, pg_dsn: str, stores=("pgvector", "chroma")) -> Deployment:
    app = root / "app-chroma"
    if not app.exists():  # a second deployment on the same root reuses the app's folder
        build_app_folder(app)
    data = root / "data"
    settings = Settings(
        data_dir=data, drops_dir=data / "drops", model_id=EMBEDDER.model_id, pg_dsn=pg_dsn,
        pg_table=f"adopt_{os.urandom(5).hex()}", stores=tuple(stores),
    ).with_data_dir(data)  # fmt: skip
    app_settings = replace(settings.app_collection, path=app)
    return Deployment(replace(settings, app_collection=app_settings), app)


def folder_checksum(folder: Path) -> str:
    """sha256 over every file's path and bytes (mtimes excluded): whether a byte changed."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode())
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()
