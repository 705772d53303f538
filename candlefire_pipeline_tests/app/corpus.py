"""A corpus for the collection's differential suite, written to a real Chroma store and a real
pgvector table through the same write sequence (the project's stores, as the pipeline writes).

Chunks vary every metadata kind Chroma holds (str, int, bool; `year` absent for some), their
documents hold LIKE's metacharacters, quotes, backslashes, mixed case and non-ASCII text, and
some documents repeat word for word (equal vectors: exact distance ties). The writes replace
papers (ids kept, added, dropped), delete some and bring one back, so insertion order is
exercised too. Vectors come from SeededEmbedder: every distinct text its own random direction,
so distances tie only where texts repeat (a lexical embedder ties them all the time on short
texts).
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import chromadb
import numpy as np
from chromadb.config import Settings as ChromaSettings

from candlefire_pipeline.backends.factory import open_backend, opened_backend
from candlefire_pipeline.operations.serving.state import PROMOTED, ServingState
from candlefire_pipeline.settings import AppClientSettings, PgAnnSettings, Settings
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

DIM = 32
#: Words the documents are made of: substrings with every character class a filter may quote.
WORDS = (
    "ALS", "als", "Als", "SOD1", "TDP-43", "C9orf72", "SPG302", "SPG-302", "SPG 302", "G93A",
    "riluzole", "edaravone", "motor", "neuron", "100%", "p_value", "50%_drop", "back\\slash",
    "it's", '"quoted"', "ünïcödé", "Größe", "日本語", "naïve", "—", "x_y%z", "O'Brien",
    "survival", "cohort", "mice", "trial", "ALSFRS-R", "FUS", "NfL",
)  # fmt: skip
ENTITIES = ("SOD1", "TDP-43", "C9orf72", "FUS", "riluzole", "edaravone", "SPG302")
SECTIONS = ("Introduction", "Methods", "Results", "Discussion", "Conclusion")
#: The same text in several papers: equal vectors, equal distances to any query.
TWIN_TEXT = "riluzole survival cohort ALS motor neuron"


class SeededEmbedder:
    """A deterministic dense embedder for the suite: a text's vector is drawn from a generator
    seeded by the text's hash (unit length, float32)."""

    model_id = "seeded-test"

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []

    def embed(self, texts) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
            vector = np.random.default_rng(seed).normal(size=self.dim)
            out[row] = vector / np.linalg.norm(vector)
        return out


@dataclass(frozen=True)
class Deployment:
    """Settings of a store pair holding the corpus, and what was written."""

    settings: Settings
    embedder: SeededEmbedder  # the store's model (or the embedder deploy was given)
    documents: list[str]  # every document written (for filters and query texts)
    ids: list[str]  # every chunk id that exists now


def _document(rng: random.Random, pmid: str) -> str:
    if rng.random() < 0.08:
        return TWIN_TEXT
    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 14))]
    return f"Paper {pmid}: " + " ".join(words)


def paper(rng: random.Random, pmid: str, version: int) -> list[dict]:
    """A paper's chunks: abstract only (bare id) or 2-5 full-text sections."""
    sections = 0 if rng.random() < 0.5 else rng.randint(2, 5)
    year = None if rng.random() < 0.12 else rng.randint(1985, 2026)
    common = {
        "title": f"Title {pmid} v{version} {rng.choice(WORDS)}",
        "year": year,
        "citation_count": rng.choice([0, 1, 2, 5, 10, 50, 100, 250]),
        "entity_names": ",".join(rng.sample(ENTITIES, rng.randint(0, 3))),
        "mesh_terms": ",".join(rng.sample(["Humans", "Mice", "Motor Neuron Disease"], 2)),
        "paper_hash": f"p-{pmid}-{version}",
    }
    if sections == 0:
        return [chunk(pmid, document=_document(rng, pmid), **common)]
    return [
        chunk(pmid, i, has_full_text=True, document=_document(rng, pmid),
              section="abstract" if i == 0 else rng.choice(SECTIONS),
              content_hash=f"c-{pmid}-{i}-{version}", **common)
        for i in range(sections)
    ]  # fmt: skip


def write_sequence(seed: int, papers: int) -> list[tuple[str, list]]:
    """The writes both stores get: ("replace", chunks) or ("delete", pmids)."""
    rng = random.Random(seed)
    pmids = [str(10_000 + i) for i in range(papers)]
    writes: list[tuple[str, list]] = [
        ("replace", [c for p in pmids[: papers // 2] for c in paper(rng, p, 0)]),
        ("replace", [c for p in pmids[papers // 2 :] for c in paper(rng, p, 0)]),
    ]
    changed = rng.sample(pmids, papers // 5)
    writes.append(("replace", [c for p in changed for c in paper(rng, p, 1)]))
    gone = rng.sample([p for p in pmids if p not in changed], 6)
    writes.append(("delete", gone))
    writes.append(("replace", [c for p in gone[:2] for c in paper(rng, p, 2)]))
    return writes


def deploy(root: Path, pg_dsn: str, seed: int = 7, papers: int = 120, embedder=None,
           **ann) -> Deployment:  # fmt: skip
    """Both stores written alike; the switch promoted to pgvector (switch tests change it).
    `embedder`: the model the chunks are embedded with (SeededEmbedder unless given)."""
    embedder = embedder or SeededEmbedder()
    settings = Settings(
        data_dir=root, drops_dir=root / "drops", pg_dsn=pg_dsn,
        model_id=embedder.model_id,
        pg_table=f"app_{uuid.uuid4().hex[:10]}", chroma_collection=f"app_{uuid.uuid4().hex[:8]}",
        chroma_ef_search=2000, hnsw_ef_search=1000, pg_ann=PgAnnSettings(**ann),
        # every call asks Postgres: these suites write between two calls and expect the next
        # to see it; the process copy of answers is the "pgvector-watched" mode (conftest.py)
        app_client=AppClientSettings(staleness_ms=0),
    )  # fmt: skip
    documents, ids = [], {}
    _exact_chroma_graph(settings)
    stores = [open_backend(name, settings) for name in ("chroma", "pgvector")]
    try:
        for operation, argument in write_sequence(seed, papers):
            if operation == "replace":
                rows = make_rows(argument, embedder.embed([c["document"] for c in argument]),
                                 model_id=embedder.model_id, dim=embedder.dim)  # fmt: skip
                documents += [c["document"] for c in argument]
                for c in argument:
                    ids[c["pmid"]] = [x["chunk_id"] for x in argument if x["pmid"] == c["pmid"]]
            else:
                for pmid in argument:
                    ids.pop(pmid, None)
            for store in stores:
                if operation == "replace":
                    store.replace_papers(rows)
                else:
                    store.delete_papers(argument)
    finally:
        for store in stores:
            store.close()
    promote_directly(settings)
    if isinstance(embedder, SeededEmbedder):
        embedder.calls.clear()
    existing = [i for chunk_ids in ids.values() for i in chunk_ids]
    return Deployment(settings, embedder, documents, existing)


@contextmanager
def changing_deployment(root: Path, pg_dsn: str, seed: int) -> Iterator[tuple]:
    """A small deployment of its own (the test writes to it) and its real Chroma collection;
    its table is emptied after."""
    deployment = deploy(root, pg_dsn, seed=seed, papers=40)
    client = chromadb.PersistentClient(
        str(deployment.settings.chroma_path), settings=ChromaSettings(anonymized_telemetry=False)
    )
    chroma = client.get_collection(deployment.settings.chroma_collection, embedding_function=None)
    try:
        yield deployment, chroma
    finally:
        client.close()
        with opened_backend("pgvector", deployment.settings) as store:
            store.reset()


def _exact_chroma_graph(settings: Settings) -> None:
    """Create the collection before the store opens it (it keeps an existing one's graph
    settings): the suites compare with Chroma as exact, and a graph built by several threads on
    a loaded machine once left 1 of 225 chunks unreachable even at ef_search 2000 (CI). One
    build thread and a dense graph make the walk reach every chunk, the same on every run."""
    client = chromadb.PersistentClient(
        str(settings.chroma_path), settings=ChromaSettings(anonymized_telemetry=False)
    )
    hnsw = {"space": "cosine", "ef_search": settings.chroma_ef_search, "num_threads": 1,
            "max_neighbors": 64, "ef_construction": 400}  # fmt: skip
    client.get_or_create_collection(
        settings.chroma_collection, configuration={"hnsw": hnsw}, embedding_function=None
    )


def promote_directly(settings: Settings, state: str = PROMOTED) -> None:
    """The switch file as a promotion leaves it (the commands are tested in test_switch.py)."""
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    settings.serving_file.write_text(ServingState(state, report_id="r-test").to_json())


def with_ann(settings: Settings, **ann) -> Settings:
    return replace(settings, pg_ann=PgAnnSettings(**ann))
