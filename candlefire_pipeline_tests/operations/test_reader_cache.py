"""The reader's query-vector cache: one for every Retriever it builds, so a switch of backend
(a rollback, a promotion) keeps the entity names' vectors, and concurrent requests share it."""

from __future__ import annotations

import threading
from pathlib import Path

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.operations.serving.machine import PROMOTED, ServingState
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.retrieval import als_corpus as als
from candlefire_pipeline_tests.retrieval.test_vector_cache import CountingEmbedder


def memory_store(_name: str, _settings: Settings):
    embedder = als.embedder()
    store = build_backend("memory")
    store.ensure_schema(embedder.model_id, embedder.dim)
    store.replace_papers(als.store_rows(embedder))
    return store


def reader_at(tmp_path: Path, embedder) -> ServingReader:
    settings = Settings(data_dir=tmp_path, drops_dir=tmp_path / "drops")
    return ServingReader(settings, embedder=embedder, opener=memory_store)


def test_a_switch_of_backend_keeps_the_cached_name_vectors(tmp_path):
    embedder = CountingEmbedder()
    reader = reader_at(tmp_path, embedder)
    first = reader.retriever()
    first.retrieve(als.QUERY, als.ENTITIES, als.TERMS)
    assert reader.backend_name == "chroma"
    reader.settings.serving_file.write_text(ServingState(PROMOTED, report_id="r1").to_json())
    second = reader.retriever()
    assert reader.backend_name == "pgvector" and second is not first
    assert second.vector_cache is first.vector_cache is reader.vector_cache
    second.retrieve("SOD1 riluzole survival", als.ENTITIES, als.TERMS)
    assert embedder.calls[-1] == ["SOD1 riluzole survival"]


def test_concurrent_requests_share_one_retriever_and_answer_alike(tmp_path):
    reader = reader_at(tmp_path, CountingEmbedder())
    expected = reader.retriever().retrieve(als.QUERY, als.ENTITIES, als.TERMS).pmids
    reader.close()
    reader = reader_at(tmp_path, CountingEmbedder())  # nothing opened yet: threads race to open
    answers, retrievers = [], set()

    def request() -> None:
        retriever = reader.retriever()
        retrievers.add(id(retriever))
        answers.append(retriever.retrieve(als.QUERY, als.ENTITIES, als.TERMS).pmids)

    threads = [threading.Thread(target=request) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(retrievers) == 1
    assert answers == [expected] * 6
