"""Qdrant specifics: the exact substring contract and its narrowing, the model contract, ids."""

from __future__ import annotations

import random

import pytest
from qdrant_client import models
from qdrant_client.local.payload_filters import unindexed_text_tokens

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.qdrant.backend import QdrantBackend
from candlefire_pipeline.backends.qdrant.filters import narrowing_tokens, qdrant_filter
from candlefire_pipeline.backends.qdrant.points import point_id
from candlefire_pipeline.backends.qdrant.server import redact_url
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

DIM = 8

NARROWING = [
    # a run of letters/digits is a whole token wherever the variant occurs only when the
    # variant itself has a separator on both of its sides
    ("SPG302", ()),
    ("SPG 302", ()),
    ("SPG-302", ()),
    ("G93A", ()),
    ("C9orf72", ()),
    ("C 9orf 72", ("9orf",)),
    ("in SOD1 mice", ("SOD1",)),
    ("TDP-43 in ALS", ("43", "in")),
    (" SPG302 ", ("SPG302",)),
    ("a-b-a-c", ("b", "a")),
    ("x_y", ()),
    ("50%", ()),
    ("(IL-6)", ("IL", "6")),
    ("ΩMEGA-1 b", ()),  # non-ASCII: tokenizers disagree on which characters are letters
    ("naïve T cells", ()),
]


@pytest.mark.parametrize(("variant", "tokens"), NARROWING, ids=[v for v, _ in NARROWING])
def test_narrowing_tokens(variant, tokens):
    assert narrowing_tokens(variant) == tokens


CONTEXT = ["", " ", "-", "X", "x9", "ü", "Ω", "_", ".", "\n", "é", "7", "ǅ", "ß"]
PIECES = ["SPG", "302", " ", "-", "a", "Z", "9", "_", "%", "(", ")", "é", ".", "in"]


def test_every_document_holding_a_variant_holds_its_narrowing_tokens():
    """Completeness: narrowing never drops a match, whatever surrounds the variant."""
    rng = random.Random(5)
    checked = 0
    for _ in range(3000):
        variant = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 6)))
        tokens = narrowing_tokens(variant)
        document = rng.choice(CONTEXT) + variant + rng.choice(CONTEXT)
        held = set(unindexed_text_tokens(document))  # the server's word tokenizer, lowercased
        assert all(t.lower() in held for t in tokens), (variant, document)
        checked += bool(tokens)
    assert checked > 500  # the property was exercised, not vacuously true


TRICKY = [
    "SPG302 restores synapses",
    "XSPG-3021 is another compound",
    "dose of spg302 daily",
    "SOD1 G-93A mice (IL-6) levels",
    "ΩMEGA-1 binds; Ωmega-1 does not",
    "naïve T cells in SOD1 mice",
    "C 9orf 72 spelled apart",
    "TDP-43 in ALS and TDP-43in ALS",
]
TERMS = [
    ["SPG302"], ["SPG-302"], ["spg302"], ["G-93"], ["IL-6)"], ["ΩMEGA-1"], ["Ωmega"],
    ["in SOD1 mice"], ["T cells in SOD1"], ["C 9orf 72"], ["TDP-43 in ALS"], ["43in"],
    ["302 r", "absent"], ["ï"],
]  # fmt: skip


@pytest.fixture
def tricky(make_backend):
    rows = make_rows([chunk(str(i), document=d) for i, d in enumerate(TRICKY)],
                     unit_vectors(len(TRICKY), DIM, 3))  # fmt: skip
    stores = {
        "scan": make_backend("qdrant"),
        "narrowed": make_backend("qdrant", narrow=True),
        "memory": make_backend("memory"),
    }
    for store in stores.values():
        store.replace_papers(rows)
    return stores


@pytest.mark.parametrize("variants", TERMS, ids=["|".join(t) for t in TERMS])
def test_exact_substring_contract_with_and_without_narrowing(tricky, variants):
    queries = unit_vectors(len(variants), DIM, 4)

    def found(store):
        return [
            [r["chunk_id"] for r in hits]
            for hits in store.substring_candidates(variants, queries, 10)
        ]

    expected = found(tricky["memory"])
    for name in ("scan", "narrowed"):
        assert found(tricky[name]) == expected, name
        assert tricky[name].contains(variants) == any(expected), name


def test_match_text_alone_would_break_the_contract(tricky):
    """Why MatchText is only a narrowing: token matching ignores case and partial tokens."""
    client, name = tricky["scan"]._client, tricky["scan"].collection
    text = models.Filter(
        must=[models.FieldCondition(key="document", match=models.MatchText(text="SPG302"))]
    )
    hits = {r.payload["document"] for r in client.scroll(name, scroll_filter=text)[0]}
    assert "dose of spg302 daily" in hits  # case-insensitive: $contains would not match
    partial = models.Filter(
        must=[models.FieldCondition(key="document", match=models.MatchText(text="SPG30"))]
    )
    assert client.scroll(name, scroll_filter=partial)[0] == []  # not a whole token ...
    assert tricky["scan"].contains(["SPG30"]) and tricky["memory"].contains(["SPG30"])  # ... yet
    assert not tricky["scan"].contains(["spg3021"])


def test_narrowed_filter_has_the_exact_condition_first():
    flt = qdrant_filter(Filter(abstract_only=True), ["in SOD1 mice", "G93A"], narrow=True)
    narrowed, plain = flt.must[-1].should
    assert narrowed.must[0].match == models.MatchSubstring(substring="in SOD1 mice")
    assert narrowed.must[1].match == models.MatchText(text="SOD1")
    assert plain.match == models.MatchSubstring(substring="G93A")
    assert flt.must[0].match == models.MatchValue(value=0)
    assert qdrant_filter(Filter()) is None


def test_point_ids_are_stable_uuids_of_chunk_ids():
    assert point_id("123_s0") == point_id("123_s0") != point_id("123")
    assert len(point_id("x")) == 36


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:s3cret@qdrant.example:6333/path?api-key=k", "https://qdrant.example:6333"),
        ("http://127.0.0.1:6333", "http://127.0.0.1:6333"),
        ("https://cloud.example", "https://cloud.example"),
    ],
)
def test_redact_url_keeps_only_scheme_host_port(url, shown):
    assert redact_url(url) == shown


def test_model_contract_lives_in_collection_metadata(make_backend, tmp_path):
    store = make_backend("qdrant")
    assert store.stored_model() is None and not store._exists()  # nothing before a write
    store.ensure_schema("test", DIM)
    info = store._client.get_collection(store.collection)
    assert info.config.metadata == {"model_id": "test", "dim": DIM}
    assert info.config.params.vectors.distance == models.Distance.COSINE
    store.reset()
    assert store.stored_model() is None and store.count() == 0


def test_foreign_collection_is_refused_with_a_clear_error(make_backend):
    store = make_backend("qdrant")
    store._client.create_collection(
        store.collection,
        vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE),
    )
    with pytest.raises(ValueError, match="no candlefire model contract"):
        store.ensure_schema("test", DIM)


def test_both_or_neither_location_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="exactly one"):
        QdrantBackend()
    with pytest.raises(ValueError, match="exactly one"):
        QdrantBackend(path=tmp_path, url="http://127.0.0.1:1")
