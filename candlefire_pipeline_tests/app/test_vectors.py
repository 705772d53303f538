"""Query texts asked again come from the collection's vector cache: the same answer, no
second embedder call; a new text in the same call is embedded with the others, once."""

from __future__ import annotations

from dataclasses import replace

from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline_tests.app.corpus import SeededEmbedder


def test_a_text_asked_again_is_not_embedded_again_and_answers_alike(served):
    collection, embedder = served
    first = collection.query(query_texts=["SOD1 mutation", "TDP-43"], n_results=5)
    made = len(embedder.calls)
    again = collection.query(query_texts=["TDP-43", "SOD1 mutation"], n_results=5)
    assert len(embedder.calls) == made  # both kept
    assert again["ids"] == first["ids"][::-1] and again["distances"] == first["distances"][::-1]
    collection.query(query_texts=["SOD1 mutation", "riluzole"], n_results=5)
    assert len(embedder.calls) == made + 1 and embedder.calls[-1] == ["riluzole"]


def test_the_cache_can_be_turned_off(app_deployment):
    embedder = SeededEmbedder()
    settings = app_deployment.settings
    off = replace(settings, retrieval=replace(settings.retrieval, query_vector_cache=0))
    with ServingCollection(off, embedder) as collection:
        for _ in range(2):
            collection.query(query_texts=["SOD1 mutation"], n_results=3)
    assert len(embedder.calls) == 2
