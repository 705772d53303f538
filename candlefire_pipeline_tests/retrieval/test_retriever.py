"""The retriever on pgvector, Chroma and the memory oracle over the ALS fixture corpus.

Expected values are worked out from als_corpus by hand (cos = s / sqrt(q*m)):
query "SPG302 synaptic ALS" (q=3) against each chunk:
  1001 "SPG302 synaptic ALS mice"         s=3 m=4  0.866
  1002 "SPG 302 synaptic ALS trial"       s=2 m=5  0.516
  1003_s0 "Synaptic regeneration compound" s=1 m=3  0.333   (1003's best chunk)
  1004 "TDP-43 aggregation ALS"           s=1 m=4  0.289
  1003_s1 "SPG-302 grip strength ALS"     s=1 m=5  0.258
  1006 "C9orf72 ... ALS FTD dementia"     s=1 m=6  0.236
  1005, 1007_s0, 1007_s1, 1008                      0
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from candlefire_pipeline.backends.base import DimensionMismatchError
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.retrieval.retriever import TIMING_STAGES, Retriever
from candlefire_pipeline_tests.retrieval import als_corpus as als

BACKENDS = ("memory", "pgvector", "chroma", "qdrant")

# semantic_n=3 over-fetches 6 chunks: 1001, 1002, 1003_s0, 1004, 1003_s1, 1006 (all > 0),
# best per PMID -> 1001, 1002, 1003, 1004, 1006 -> top 3.
SEMANTIC = ["1001", "1002", "1003"]
# one hit per entity: TDP-43 -> 1004 (2/sqrt(2*4) = 0.707), SOD1 -> 1005 (1/sqrt(3) = 0.577),
# C9orf72 -> 1006 (1/sqrt(6) = 0.408), FTD -> 1006 again (0.408): merged best per PMID.
ENTITY = ["1004", "1005", "1006"]
# keyword terms = entities + terms; each VARIANT ranks the chunks holding it by its own vector:
#   "TDP-43" -> 1004 2/sqrt(2*4) = .707      "SOD1" -> 1005 1/sqrt(3) = .577
#   "C9orf72", "FTD" -> 1006 1/sqrt(6) = .408 "SPG302" -> 1001 1/sqrt(4) = .5
#   "SPG 302" -> 1002 2/sqrt(2*5) = .632     "SPG-302" -> 1003_s1 2/sqrt(2*5) = .632
#   "ATXN2" -> 1007_s1 1/sqrt(5) = .447      "TDP43", "TDP 43", "XYZ999" ... -> nothing
# best per PMID, most similar first (1002 and 1003 tie exactly: by pmid):
KEYWORD = ["1004", "1002", "1003", "1005", "1001", "1007", "1006"]
GROUNDING = {
    "TDP-43": {"corpus": True, "abstract": True},
    "SOD1": {"corpus": True, "abstract": True},
    "C9orf72": {"corpus": True, "abstract": True},
    "FTD": {"corpus": True, "abstract": True},
    "SPG302": {"corpus": True, "abstract": True},  # 1001's abstract chunk
    "ATXN2": {"corpus": True, "abstract": False},  # only 1007's discussion chunk
    "TDP43": {"corpus": True, "abstract": True},  # as "TDP-43" in 1004's abstract
    "XYZ999": {"corpus": False, "abstract": False},
}
# RRF k=10 over [SEMANTIC, ENTITY, KEYWORD], 1 / (k + rank + 1), rank 0-based:
#   1004 1/11+1/11 = .1818   1002 1/12+1/12 = .1667   1001 1/11+1/15 = .1576
#   1005 1/12+1/14 = .1548   1003 1/13+1/13 = .1538   1006 1/13+1/17 = .1357   1007 1/16
RRF_ORDER = ["1004", "1002", "1001", "1005", "1003", "1006", "1007"]
# no reranker: rerank_score = rrf; final = rrf x ln(citations+2) x (1 + 0.5 (year-1990)/35):
#   1004 .1818 x ln 302 x 1.357 = 1.409   1006 .1357 x ln 802 x 1.300 = 1.180
#   1005 .1548 x ln 1002 x 1.071 = 1.146  1003 .1538 x ln 42 x 1.443 = .830
#   1001 .1576 x ln 5 x 1.414 = .359      1007 .0625 x ln 12 x 1.257 = .195
#   1002 .1667 x ln 2 x 1.486 = .172
FINAL_ORDER = ["1004", "1006", "1005", "1003", "1001", "1007", "1002"]


@pytest.fixture(scope="module", params=BACKENDS)
def retriever(request, als_store_factory):
    backend = als_store_factory(request.param)
    return Retriever(backend, als.embedder(), als.SETTINGS)


@pytest.fixture(scope="module")
def retrieval(retriever):
    return retriever.retrieve(als.QUERY, entity_names=als.ENTITIES, terms=als.TERMS)


def query_vector() -> np.ndarray:
    return als.embedder().embed([als.QUERY])[0]


def test_fixture_vocabulary_is_collision_free():
    """The precondition of every hand-worked cosine in this module."""
    assert len(als.word_buckets(als.HASHING_DIM)) == len(als.vocabulary())


def test_search_best_chunk_per_pmid_and_similarity(retriever):
    found = retriever.search(als.QUERY, n=4)
    assert [r["pmid"] for r in found] == ["1001", "1002", "1003", "1004"]
    expected = [3 / math.sqrt(12), 2 / math.sqrt(15), 1 / 3, 1 / math.sqrt(12)]
    assert [r["similarity"] for r in found] == pytest.approx(expected, abs=1e-4)
    assert found[2]["chunk_id"] == "1003_s0"  # beats its own SPG-302 body chunk (0.258)


def test_search_accepts_a_vector(retriever):
    by_text = retriever.search(als.QUERY, n=3)
    by_vector = retriever.search(query_vector(), n=3)
    assert [r["chunk_id"] for r in by_vector] == [r["chunk_id"] for r in by_text]


def test_entities_one_batched_call(retriever):
    found = retriever.search_by_entities(als.ENTITIES)
    assert [r["pmid"] for r in found] == ENTITY
    assert found[0]["similarity"] == pytest.approx(2 / math.sqrt(8), abs=1e-4)


def test_keyword_every_spelling_ranked_by_its_own_embedding(retriever):
    found = retriever.search_by_keyword(["SPG302"])
    # "SPG 302" -> 1002 and "SPG-302" -> 1003_s1 at 2/sqrt(10); SPG302 -> 1001 at 1/2
    assert [r["pmid"] for r in found] == ["1002", "1003", "1001"]
    assert found[1]["chunk_id"] == "1003_s1"
    assert [r["similarity"] for r in found] == pytest.approx([2 / math.sqrt(10)] * 2 + [0.5])
    assert retriever.search_by_keyword(["XYZ999"]) == []
    assert retriever.search_by_keyword(["  ", ""]) == []  # blank terms are skipped


@pytest.mark.parametrize(
    ("term", "corpus", "abstract"),
    [
        ("SPG302", True, True),
        ("SPG-302", True, True),  # its variant SPG302 is in 1001's abstract
        ("grip", True, False),  # only in 1003's results chunk
        ("ATXN2", True, False),
        ("ATXN-2", True, False),
        ("TDP43", True, True),
        ("C9orf72", True, True),
        ("XYZ999", False, False),
    ],
)
def test_grounding(retriever, term, corpus, abstract):
    assert retriever.is_grounded_in_corpus(term) is corpus
    assert retriever.is_grounded_in_abstract(term) is abstract


def test_get_paper_and_paper_texts(retriever):
    paper = retriever.get_paper("1003")
    assert paper["chunk_id"] == "1003_s0" and paper["chunk_index"] == 0
    assert retriever.get_paper("999999") is None
    texts = retriever.paper_texts_for_pmids(["1003", "1001", "999999", ""])
    assert texts == {
        "1003": {
            "abstract": "Synaptic regeneration compound",
            "full": "Synaptic regeneration compound\nSPG-302 grip strength ALS",
        },
        "1001": {"abstract": "SPG302 synaptic ALS mice", "full": "SPG302 synaptic ALS mice"},
        "999999": {"abstract": "", "full": ""},  # candle-fire answers every pmid asked
    }
    assert retriever.paper_texts_for_pmids([]) == {}


def test_retrieve_lists_and_grounding(retrieval):
    assert retrieval.semantic_pmids == SEMANTIC
    assert retrieval.entity_pmids == ENTITY
    assert retrieval.keyword_pmids == KEYWORD
    assert retrieval.grounding == GROUNDING
    assert [r["pmid"] for r in retrieval.fused] == RRF_ORDER
    assert list(retrieval.plan.keyword_terms) == [*als.ENTITIES, *als.TERMS]
    assert "FTD" not in retrieval.plan.focus_terms  # a generic disease word


def test_retrieve_final_order_and_scores(retrieval):
    assert retrieval.pmids == FINAL_ORDER
    by_pmid = {r["pmid"]: r for r in retrieval.results}
    assert by_pmid["1001"]["rrf_score"] == round(1 / 11 + 1 / 15, 6)  # candle-fire rounds it
    assert by_pmid["1004"]["final_score"] == pytest.approx(
        round(2 / 11, 6) * math.log(302) * (1 + 0.5 * 25 / 35)
    )
    for row in retrieval.results:
        assert row["rerank_score"] == row["rrf_score"]  # no reranker configured
        assert {"similarity", "rrf_score", "rerank_score", "final_score"} <= row.keys()
    # 1003 keeps its most similar row across lists: the keyword hit 1003_s1 (.632 to its
    # variant) beats its semantic row 1003_s0 (.333 to the query), as in candle-fire's rrf_merge
    assert by_pmid["1003"]["chunk_id"] == "1003_s1"
    assert retrieval.citations.injected_pmids == ()  # ATXN2's paper 1007 is cited already


def test_retrieve_timings(retrieval):
    assert set(retrieval.timings) == set(TIMING_STAGES)
    assert all(value >= 0 for value in retrieval.timings.values())
    parts = sum(v for k, v in retrieval.timings.items() if k != "total")
    assert retrieval.timings["total"] >= parts


def test_retrieve_without_entities_or_terms(retriever):
    result = retriever.retrieve(als.QUERY, terms=())
    assert result.entity_pmids == [] and result.keyword_pmids == [] and result.grounding == {}
    # RRF of the semantic list alone keeps its order; the boost reorders it:
    # 1001 1/11 x ln5 x 1.414 = .207, 1002 1/12 x ln2 x 1.486 = .086,
    # 1003 1/13 x ln42 x 1.443 = .415
    assert result.pmids == ["1003", "1001", "1002"]


def test_terms_default_to_the_query_texts_identifier_tokens(retriever):
    result = retriever.retrieve(als.QUERY)  # the app's rule: SPG302 and ALS from the text
    assert list(result.plan.keyword_terms) == ["SPG302", "ALS"]
    assert list(result.plan.focus_terms) == ["SPG302"]
    assert result.keyword_pmids == ["1002", "1003", "1001"] + ["1004", "1006"]


def test_blank_terms_and_names_are_skipped_like_candle_fire(retriever):
    result = retriever.retrieve(als.QUERY, entity_names=["  "], terms=["SPG302", "  "])
    assert result.entity_pmids == []
    assert list(result.grounding) == ["SPG302"]


def test_no_paper_when_no_focus_term_is_in_the_corpus(retriever):
    result = retriever.retrieve(als.QUERY, terms=["XYZ999", "ALS"])
    assert result.citations.evidence_ungrounded and result.results == []
    assert result.fused  # the ranking still ran; the app withholds it
    generic_only = retriever.retrieve(als.QUERY, terms=["ALS"])
    assert not generic_only.citations.evidence_ungrounded and generic_only.results


def test_landscape_only_terms_append_their_keyword_hits(retriever):
    # RRF: 1001 1/11 (semantic), 1007 1/11 (keyword, seen later), 1002 1/12, 1003 1/13; the
    # rerank step keeps the top 1 of that order: 1001
    narrow = Retriever(retriever.backend, als.embedder(), replace(als.SETTINGS, rerank_top=1))
    result = narrow.retrieve(als.QUERY, terms=["ATXN2"])
    # ATXN2 is only in 1007's discussion chunk: cited although the top 1 leaves it out
    assert result.citations.landscape_terms == ("ATXN2",)
    assert result.pmids == ["1001", "1007"] and result.citations.injected_pmids == ("1007",)
    assert result.results[-1]["injected"] is True


@pytest.mark.parametrize(
    ("model_id", "dim"),
    [
        ("hashing-v1:64", 64),  # another dimension
        ("another-model", als.HASHING_DIM),  # same dimension, another model
    ],
)
def test_model_or_dimension_mismatch_is_refused(retriever, model_id, dim):
    other = HashingEmbedder(dim=dim, model_id=model_id)
    with pytest.raises(DimensionMismatchError, match=als.embedder().model_id):
        Retriever(retriever.backend, other, als.SETTINGS)


def test_wrong_query_vector_dimension_is_refused(retriever):
    with pytest.raises(DimensionMismatchError, match="dims"):
        retriever.search(np.ones(als.HASHING_DIM + 1, dtype=np.float32))
