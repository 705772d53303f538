"""Conformance on the deployment's own stores (no Dagster): candle-fire's recorded answers.

Each store gets a scratch target (a pgvector table, a Chroma or Qdrant collection) configured
exactly like the serving one (layout, search effort, substring mode, server), holding candle-fire's
fixture corpus with the vectors its collection stored. Every recorded query runs through the
retriever there and every stage is checked (parity/conformance/check.py). So the result means the
same on any deployment, whatever its own corpus. A result is cached per fixtures, code, store
configuration and server version: a nightly report re-runs it only after one of them changed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
from collections.abc import Iterable
from dataclasses import asdict, replace
from functools import cache
from pathlib import Path

from candlefire_pipeline.backends.base import VectorBackend
from candlefire_pipeline.backends.factory import opened_backend, pg_ann_params
from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.embedding.memo import MemoEmbedder
from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.parity.conformance.check import (
    ExactPools,
    StoreConformance,
    run_conformance,
    texts_to_embed,
)
from candlefire_pipeline.parity.conformance.fixtures import (
    FIXTURE_MODEL_ID,
    ConformanceFixtureError,
    ConformanceFixtures,
)
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import GATED_STORES, MEMORY, PGVECTOR

log = logging.getLogger(__name__)

#: The scratch table / collection of the fixture corpus in every store.
TARGET = "candlefire_conformance"
#: A store that is neither gated nor the oracle answers every k-th recorded query: qdrant-client's
#: local mode evaluates payload filters in Python (0.2 s a call here, 3 min for the whole set).
EVALUATED_SAMPLE = 4
#: The code whose behaviour a result vouches for (a change there invalidates cached results).
CODE_PACKAGES = ("retrieval", "backends", "parity", "corpus")


def fixture_runtime(settings: Settings) -> str:
    """The float32 query runtime: the recording's vectors are MiniLM fp32 (int8 moves them)."""
    runtime = settings.embed_runtime("query")
    return "onnx" if runtime == "onnx-int8" else runtime


def target_settings(settings: Settings) -> Settings:
    """The deployment's store configuration, pointed at the conformance targets."""
    return replace(settings, pg_table=TARGET, chroma_collection=TARGET, qdrant_collection=TARGET)


@cache
def code_fingerprint() -> str:
    """sha256 over the source of the packages a conformance result depends on."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for package in CODE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def server_identity(store: VectorBackend) -> str:
    """What answers on the store's side: the Postgres and pgvector versions, or the client."""
    if store.name == PGVECTOR:
        row = store.conn.execute(
            "SELECT current_setting('server_version'), "
            "(SELECT extversion FROM pg_extension WHERE extname = 'vector')"
        ).fetchone()
        return f"postgres {row[0]}, pgvector {row[1]}"
    package = {"chroma": "chromadb", "qdrant": "qdrant-client"}.get(store.name)
    return f"{package} {importlib.metadata.version(package)}" if package else store.name


def store_configuration(settings: Settings, name: str) -> dict:
    """Everything of the settings that shapes a store's answers."""
    common = {"substring_mode": settings.substring_mode, "retrieval": asdict(settings.retrieval)}
    if name == PGVECTOR:
        return {**common, "ann": asdict(pg_ann_params(settings)), "m": settings.hnsw_m,
                "ef_construction": settings.hnsw_ef_construction}  # fmt: skip
    if name == "chroma":
        return {**common, "ef_search": settings.chroma_ef_search, "server": settings.chroma_host}
    if name == "qdrant":
        return {**common, "server": settings.qdrant_url, "ef": settings.hnsw_ef_search}
    return common


class ConformanceRun:
    """The fixtures, their corpus, the query embedder and the exact oracle, prepared once."""

    def __init__(self, settings: Settings, fixtures: ConformanceFixtures) -> None:
        self.settings, self.fixtures = settings, fixtures
        runtime = fixture_runtime(settings)
        embedder = load_embedder(FIXTURE_MODEL_ID, runtime=runtime, onnx_dir=settings.onnx_dir)
        self.embedder = MemoEmbedder(embedder)
        self.embedder.embed(texts_to_embed(fixtures))
        self.rows = fixtures.store_rows()
        oracle = MemoryBackend(substring_mode=settings.substring_mode)
        oracle.replace_papers(self.rows)
        self.oracle = oracle
        self.exact = ExactPools(Retriever(oracle, self.embedder, settings.retrieval))

    def fingerprint(self, name: str, store: VectorBackend) -> str:
        parts = {
            "fixtures": self.fixtures.fingerprint,
            "code": code_fingerprint(),
            "store": name,
            "configuration": store_configuration(self.settings, name),
            "server": server_identity(store),
            "runtime": fixture_runtime(self.settings),
        }
        return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]

    def check(self, name: str, store: VectorBackend) -> StoreConformance:
        """Load the corpus into the store's target if it is not there, then every query."""
        expected = dict(zip(self.rows["chunk_id"].to_pylist(),
                            self.rows["content_hash"].to_pylist(), strict=True))  # fmt: skip
        if store.chunk_hashes() != expected:
            store.delete_papers(sorted(set(store.paper_hashes()) - set(self.rows["pmid"])))
            store.replace_papers(self.rows)
        sample = 1 if name in (*GATED_STORES, MEMORY) else EVALUATED_SAMPLE
        queries = self.fixtures.queries[::sample]
        retriever = Retriever(store, self.embedder, self.settings.retrieval)
        return run_conformance(name, retriever, self.fixtures, self.exact, queries)


def check_stores(settings: Settings, stores: Iterable[str]) -> dict[str, dict]:
    """store -> its conformance (StoreConformance.to_dict() + fingerprint, cached or not); a
    store that cannot be checked gets {"error": why}; no fixtures: every store gets the error."""
    try:
        fixtures = ConformanceFixtures.open(settings.conformance_dir)
    except ConformanceFixtureError as exc:
        log.warning("conformance: %s", exc)
        return {name: {"error": str(exc)} for name in stores}
    run: ConformanceRun | None = None
    results = {}
    for name in stores:
        try:
            results[name], run = _check_one(settings, fixtures, name, run)
        except Exception as exc:  # a store that cannot be checked is reported, never fatal here
            log.warning("conformance of %s could not run: %s", name, exc)
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return results


def _check_one(
    settings: Settings, fixtures: ConformanceFixtures, name: str, run: ConformanceRun | None
) -> tuple[dict, ConformanceRun]:
    if name == MEMORY:
        run = run or ConformanceRun(settings, fixtures)
        return _checked(settings, run, name, run.oracle), run
    with opened_backend(name, target_settings(settings)) as store:
        run = run or ConformanceRun(settings, fixtures)
        return _checked(settings, run, name, store), run


def _checked(settings: Settings, run: ConformanceRun, name: str, store: VectorBackend) -> dict:
    key = run.fingerprint(name, store)
    cached = settings.conformance_cache_dir / f"{name}-{key}.json"
    if cached.exists():
        return {**json.loads(cached.read_text()), "cached": True}
    checked = run.check(name, store)
    log.info("conformance %s: %s", name, checked.summary())
    result = {**checked.to_dict(), "fingerprint": key, "server": server_identity(store)}
    cached.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(cached, json.dumps(result, indent=1))
    return {**result, "cached": False}
