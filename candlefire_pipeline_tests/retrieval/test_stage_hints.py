"""The retriever names its stage on every ANN call, so a store can spend the effort each needs."""

from __future__ import annotations

from candlefire_pipeline.backends.memory import MemoryBackend
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.retrieval.ties import TIE_MARGIN
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows


class StageSpy(MemoryBackend):
    """The exact oracle, recording (number of query vectors, n, stage) of each ANN call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int, int, str | None]] = []

    def semantic_candidates(self, vectors, n, where=None, stage=None, texts=None):
        self.calls.append((len(vectors), n, stage))
        return super().semantic_candidates(vectors, n, where, stage, texts)


def test_retrieve_names_the_semantic_and_entity_stages():
    embedder = HashingEmbedder(dim=32)
    docs = ["SOD1 mutation in motor neurons", "TDP-43 aggregates", "C9orf72 repeat expansion"]
    chunks = [chunk(str(i), document=d) for i, d in enumerate(docs)]
    store = StageSpy()
    store.replace_papers(make_rows(chunks, embedder.embed(docs), model_id=embedder.model_id))
    retriever = Retriever(store, embedder)
    retriever.retrieve("ALS genetics", ["SOD1", "TDP-43", "C9orf72"], ["SOD1"])
    # each stage asks TIE_MARGIN more than it keeps (60 chunks for 30 papers, 10 per name)
    assert store.calls == [(1, 60 + TIE_MARGIN, "semantic"), (3, 10 + TIE_MARGIN, "entities")]
    store.calls.clear()
    retriever.search("ALS genetics", n=5)
    retriever.search_by_entities(["SOD1"])
    assert store.calls == [(1, 10 + TIE_MARGIN, "semantic"), (1, 10 + TIE_MARGIN, "entities")]
