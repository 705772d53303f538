"""candle-fire's search path, unchanged, on the real Chroma collection and on the serving collection
over pgvector: identical answers on the conformance fixtures' 110 queries (the recorded corpus,
candle-fire's stored vectors, the real packaged model embedding the queries)."""

from __future__ import annotations

import uuid

import chromadb
import pytest
from chromadb.config import Settings as ChromaSettings

from benchmarks.app import search_path as app
from benchmarks.app.counting import CountingCalls, CountingEmbedder, EmbeddingCollection
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.parity.conformance.fixtures import FIXTURE_MODEL_ID
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.app.corpus import promote_directly

#: Similarities closer than this may come in either order (the fixtures' README).
TIE = 1e-5


@pytest.fixture(scope="module")
def stores(tmp_path_factory, pg_dsn, conformance_rows):
    """The conformance corpus in a Chroma store (exact at 2,542 chunks) and a pgvector table."""
    root = tmp_path_factory.mktemp("conformance-app")
    settings = Settings(
        data_dir=root, drops_dir=root / "drops", model_id=FIXTURE_MODEL_ID, pg_dsn=pg_dsn,
        pg_table=f"cf_{uuid.uuid4().hex[:10]}", chroma_ef_search=3000,
    )  # fmt: skip
    for name in ("chroma", "pgvector"):
        with opened_backend(name, settings) as store:
            store.replace_papers(conformance_rows)
    promote_directly(settings)
    yield settings
    with opened_backend("pgvector", settings) as store:
        store.reset()


def same_rows(expected: list[dict], got: list[dict], key: str, score: str, where: str) -> int:
    """Same rows in the same order, scores within TIE (rows with tied scores may swap); the
    number of swapped places."""
    assert len(got) == len(expected), f"{where}: {len(got)} rows, Chroma {len(expected)}"
    swaps = 0
    for k, (e, g) in enumerate(zip(expected, got, strict=True)):
        assert abs(e[score] - g[score]) <= TIE, f"{where}: {score} at {k}"
        if e[key] != g[key]:
            swaps += 1
            tied = [row for row in expected if abs(row[score] - g[score]) <= TIE]
            assert any(row[key] == g[key] for row in tied) or k == len(expected) - 1, where
    by_key = {row[key]: row for row in expected}
    for row in got:
        if row[key] in by_key:
            mine = {k: v for k, v in row.items() if k not in (score, "rrf_score", "similarity")}
            theirs = {k: v for k, v in by_key[row[key]].items() if k in mine}
            assert mine == theirs, f"{where}: row {row[key]}"
    return swaps


def test_the_search_path_answers_alike_on_every_conformance_query(
    stores, conformance, conformance_embedder
):
    client = chromadb.PersistentClient(
        str(stores.chroma_path), settings=ChromaSettings(anonymized_telemetry=False)
    )
    chroma = EmbeddingCollection(
        client.get_collection(stores.chroma_collection, embedding_function=None),
        conformance_embedder,
    )
    swaps, grounded, cited = 0, 0, 0
    embedder = CountingEmbedder(conformance_embedder)
    with open_collection(stores, embedder) as collection:
        served = CountingCalls(collection)
        assert served.count() == chroma.count() == 2542
        for query in conformance.queries:
            where = query.id
            args = (query.text, list(query.entities), list(query.terms))
            expected, got = app.answer(chroma, *args), app.answer(served, *args)
            assert collection.target.backend == "pgvector"
            for stage in ("search", "entities", "keyword"):
                swaps += same_rows(getattr(expected, stage), getattr(got, stage), "chunk_id",
                                   "similarity", f"{where} {stage}")  # fmt: skip
            swaps += same_rows(expected.fused, got.fused, "pmid", "rrf_score", f"{where} rrf")
            assert got.grounding == expected.grounding, where
            assert got.texts == expected.texts, where
            assert got.paper == expected.paper, where
            grounded += sum(corpus for corpus, _ in got.grounding.values())
            cited += len(got.texts)
    # at most one embedder call per query(): a text embedded before comes from the vector cache
    assert 0 < embedder.calls <= served.calls["query"]
    calls = {kind: round(n / 110, 1) for kind, n in served.calls.items()}
    print(f"per request: {calls} calls; {embedder.calls / 110:.1f} embedder calls")
    assert len(conformance.queries) == 110
    assert grounded > 50 and cited > 110 * 10  # the stages found things, on both
    assert swaps <= 5, f"{swaps} places swapped between tied rows"
