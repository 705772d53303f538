"""pgvector ANN index layouts (float32 / half-precision / binary HNSW over float32 vectors) and
per-stage ANN effort."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import psycopg
import pytest

from candlefire_pipeline.backends.base import DimensionMismatchError, Filter
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.layout import AnnParams, Layout, StoreLayoutError
from candlefire_pipeline.settings import PgAnnSettings
from candlefire_pipeline_tests.fixtures_backends import PG_LAYOUTS, chunk, make_rows, unit_vectors

DIM = 8
HALFVEC = AnnParams(vector_type="halfvec")
BINARY = AnnParams(quantization="binary")


def clustered(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around 20 centres: neighbours are meaningful, as with real embeddings."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    vectors = centres[rng.integers(0, 20, n)] + 0.6 * rng.normal(size=(n, dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def column_type(store: PgVectorBackend) -> str:
    return store.conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass(%s) AND attname = 'embedding'",
        [store.names.table],
    ).fetchone()[0]


def ann_index_def(store: PgVectorBackend) -> str:
    return store.conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
        [f"{store.names.table}_embedding_hnsw"],
    ).fetchone()[0]


@pytest.mark.parametrize(
    ("ann", "column", "index_words"),
    [
        (AnnParams(), f"vector({DIM})", ["vector_cosine_ops"]),
        (HALFVEC, f"vector({DIM})", [f"halfvec({DIM})", "halfvec_cosine_ops"]),
        (BINARY, f"vector({DIM})", ["binary_quantize", f"bit({DIM})", "bit_hamming_ops"]),
    ],
    ids=["vector", "halfvec", "binary"],
)
@pytest.mark.parametrize("bulk", [False, True], ids=["incremental", "first-build"])
def test_layout_is_built_into_table_and_index(make_backend, ann, column, index_words, bulk):
    store = make_backend("pgvector", ann=ann, bulk_rebuild_rows=10 if bulk else 10_000)
    vectors = unit_vectors(30, DIM, seed=1)
    store.replace_papers(make_rows([chunk(str(i)) for i in range(30)], vectors))
    assert column_type(store) == column
    assert all(word in ann_index_def(store) for word in index_words)
    assert store.stored_layout() == Layout.of(ann)
    hits = store.semantic_candidates(vectors[[7]], 3)[0]
    # every layout re-ranks (or ranks) by the float32 cosine: exact similarities
    assert hits[0]["chunk_id"] == "7" and hits[0]["similarity"] == pytest.approx(1, abs=1e-6)


def test_halfvec_and_binary_together_are_refused():
    with pytest.raises(ValueError, match="choose two different ANN indexes"):
        PgAnnSettings(vector_type="halfvec", quantization="binary")


def test_a_halfvec_column_of_an_earlier_release_is_refused_with_the_way_out(make_backend, pg_dsn):
    store = make_backend("pgvector")
    table = store.names.ident().as_string(store.conn)
    store.conn.execute(f"CREATE TABLE {table} (chunk_id text, embedding halfvec({DIM}))")
    store.conn.commit()
    assert store.stored_layout() == Layout("halfvec column", "none")
    with pytest.raises(StoreLayoutError, match="halfvec column .*rebuild the store"):
        store.semantic_candidates(unit_vectors(1, DIM), 3)


@pytest.mark.parametrize(
    ("built_as", "read_as", "message"),
    [
        (HALFVEC, AnnParams(), "built with a half-precision HNSW index but an HNSW index"),
        (AnnParams(), HALFVEC, "built with an HNSW index but a half-precision HNSW index"),
        (AnnParams(), BINARY, "built with an HNSW index but a binary-quantized HNSW index"),
        (BINARY, AnnParams(), "built with a binary-quantized HNSW index but an HNSW index"),
    ],
    ids=["halfvec-as-vector", "vector-as-halfvec", "plain-as-binary", "binary-as-plain"],
)
def test_a_table_is_never_read_in_another_layout(make_backend, pg_dsn, built_as, read_as, message):
    built = make_backend("pgvector", ann=built_as)
    built.replace_papers(make_rows([chunk("1"), chunk("2")], unit_vectors(2, DIM)))
    other = PgVectorBackend(pg_dsn, table=built.names.table, ann=read_as)
    try:
        with pytest.raises(StoreLayoutError, match=message) as caught:
            other.semantic_candidates(unit_vectors(1, DIM), 3)
        assert "CANDLEFIRE_PG_VECTOR_TYPE" in str(caught.value)
        assert "rebuild the store" in str(caught.value)
        with pytest.raises(StoreLayoutError):
            other.count()
        with pytest.raises(DimensionMismatchError):  # the contract error operators already know
            other.replace_papers(make_rows([chunk("3")], unit_vectors(1, DIM)))
        assert built.count() == 2  # the refused write changed nothing
        other.reset()  # the rebuild: the next write takes the configured layout
        other.replace_papers(make_rows([chunk("3")], unit_vectors(1, DIM)))
        assert other.stored_layout() == Layout.of(read_as)
        assert other.count() == 1
    finally:
        other.close()


def test_missing_ann_index_is_rebuilt_by_the_next_write(make_backend):
    store = make_backend("pgvector", ann=BINARY)
    store.replace_papers(make_rows([chunk("1")], unit_vectors(1, DIM)))
    store.conn.execute(pg_sql.sql.SQL("DROP INDEX {}").format(store.names.hnsw))
    store._ready = None  # a new process would start like this
    assert store.stored_layout() == Layout("vector", "unknown")
    assert store.count() == 1  # readable: a missing index changes speed, not answers
    store.replace_papers(make_rows([chunk("2")], unit_vectors(1, DIM, seed=3)))
    assert store.stored_layout() == Layout("vector", "binary")
    assert "binary_quantize" in ann_index_def(store)


def test_halfvec_refuses_components_it_cannot_hold(make_backend):
    store = make_backend("pgvector", ann=HALFVEC)
    vectors = unit_vectors(2, DIM)
    vectors[1, 0] = 70_000.0
    with pytest.raises(ValueError, match="largest value a halfvec holds"):
        store.replace_papers(make_rows([chunk("1"), chunk("2")], vectors))
    assert store.count() == 0


@pytest.mark.parametrize("name", ["pgvector", *PG_LAYOUTS])
def test_ann_uses_the_hnsw_index(make_backend, name):
    store = make_backend(name)
    vectors = unit_vectors(200, DIM, seed=2)
    store.replace_papers(make_rows([chunk(str(i)) for i in range(200)], vectors))
    dim = DIM
    query, params = pg_sql.semantic_query(
        store.names, Filter(), list(vectors[:2]), 5, store.layout, dim, 50
    )
    store.conn.execute("SET enable_seqscan = off")  # small table: make the plan choice explicit
    plan = store.conn.execute(b"EXPLAIN " + query.as_bytes(store.conn), params).fetchall()
    store.conn.execute("RESET enable_seqscan")
    assert any(f"{store.names.table}_embedding_hnsw" in line[0] for line in plan)


def binary_rerank_top(vectors: np.ndarray, query: np.ndarray, k: int, factor: int) -> set[int]:
    """The algorithm binary quantization runs, done exactly: Hamming top k*factor, cosine top k."""
    hamming = ((vectors > 0) != (query > 0)).sum(axis=1)
    candidates = np.argsort(hamming, kind="stable")[: k * factor]
    return set(candidates[np.argsort(-(vectors[candidates] @ query))[:k]].tolist())


def overlap(found: list[dict], wanted: set[int]) -> float:
    return len({int(r["chunk_id"]) for r in found} & wanted) / len(wanted)


@pytest.mark.parametrize("name", ["pgvector", *PG_LAYOUTS])
def test_ann_recall_against_the_exact_oracle(make_backend, name):
    """Recall@10 over 3,000 clustered 64-dim vectors against exact search.

    Binary quantization is held to the exact run of its own algorithm (64 sign bits lose most
    neighbours here, real 384-dim figures are in docs/BENCHMARKS.md); every layout's similarity
    is the cosine to the stored vector.
    """
    dim, k = 64, 10
    vectors = clustered(3_000, dim)
    ann = replace(PG_LAYOUTS.get(name, AnnParams()), full_scan_rows=0)  # the graph walk
    store = make_backend("pgvector", ann=ann)
    store.replace_papers(make_rows([chunk(str(i)) for i in range(3_000)], vectors))
    queries = clustered(40, dim, seed=9)
    found = store.semantic_candidates(queries, k, stage="semantic")
    if store.layout.quantization == "binary":
        factor = store.ann.rerank_factor
        wanted = [binary_rerank_top(vectors, q, k, factor) for q in queries]
    else:
        wanted = [set(np.argsort(-(vectors @ q))[:k].tolist()) for q in queries]
    recall = np.mean([overlap(f, w) for f, w in zip(found, wanted, strict=True)])
    # binary: candidates tied at the k*factor-th Hamming distance are an arbitrary pick on both,
    # and HNSW over a Hamming space full of ties is itself approximate (0.89-0.93 over runs)
    assert recall >= (0.85 if store.layout.quantization == "binary" else 0.97), recall
    for hits, query in zip(found, queries, strict=True):
        sims = [h["similarity"] for h in hits]
        assert sims == sorted(sims, reverse=True) and len(hits) == k
        for hit in hits:
            exact_sim = float(vectors[int(hit["chunk_id"])] @ query)
            assert hit["similarity"] == pytest.approx(exact_sim, abs=1e-5)


def current(store: PgVectorBackend, guc: str) -> str:
    return store.conn.execute("SELECT current_setting(%s)", [guc]).fetchone()[0]


def test_a_small_table_is_searched_exactly_and_a_large_one_through_the_graph(make_backend):
    """Below full_scan_rows no graph walk can miss a neighbour (Qdrant's full_scan_threshold)."""
    vectors = clustered(300, DIM)
    small = make_backend("pgvector", ann=AnnParams(full_scan_rows=300))
    large = make_backend("pgvector", ann=AnnParams(full_scan_rows=299, ef_search=3))
    for store in (small, large):
        store.replace_papers(make_rows([chunk(str(i)) for i in range(300)], vectors))
        store.conn.execute("SELECT pg_stat_force_next_flush()")  # the estimate reads the stats
    queries = clustered(30, DIM, seed=3)
    wanted = [np.argsort(-(vectors @ q))[:10].tolist() for q in queries]
    exact = small.semantic_candidates(queries, 10, stage="entities")
    assert [[int(r["chunk_id"]) for r in hits] for hits in exact] == wanted
    assert current(small, "hnsw.ef_search") == "40"  # no effort sent: no walk
    large.semantic_candidates(queries, 10, stage="semantic")
    assert current(large, "hnsw.ef_search") == "10"  # the walk, at max(ef, n)


def test_each_stage_runs_with_its_own_effort(make_backend):
    ann = AnnParams(ef_search=120, ef_search_entities=15, max_scan_tuples=5_000, full_scan_rows=0)
    store = make_backend("pgvector", ann=ann)
    store.replace_papers(make_rows([chunk(str(i)) for i in range(20)], unit_vectors(20, DIM)))
    queries = unit_vectors(3, DIM, seed=4)
    store.semantic_candidates(queries, 10, stage="entities")
    assert current(store, "hnsw.ef_search") == "15"
    assert current(store, "hnsw.iterative_scan") == "relaxed_order"
    assert current(store, "hnsw.max_scan_tuples") == "5000"
    store.semantic_candidates(queries[:1], 40)  # no stage: the semantic stage
    assert current(store, "hnsw.ef_search") == "120"
    store.semantic_candidates(queries, 10, stage="entities")
    assert current(store, "hnsw.ef_search") == "15"
    # a walk for more rows than ef_search explores at least as many
    store.semantic_candidates(queries[:1], 300, stage="semantic")
    assert current(store, "hnsw.ef_search") == "300"
    with pytest.raises(ValueError, match="stage must be one of"):
        store.semantic_candidates(queries, 10, stage="keyword")


def test_binary_walk_explores_every_candidate_it_reranks(make_backend):
    store = make_backend(
        "pgvector",
        ann=AnnParams(
            quantization="binary", rerank_factor=30, ef_search_entities=200, full_scan_rows=0
        ),
    )
    store.replace_papers(make_rows([chunk(str(i)) for i in range(20)], unit_vectors(20, DIM)))
    store.semantic_candidates(unit_vectors(1, DIM), 20, stage="entities")
    assert current(store, "hnsw.ef_search") == "600"


def test_effort_is_set_again_after_a_reconnect(make_backend, pg_dsn):
    store = make_backend("pgvector", ann=AnnParams(ef_search=77, full_scan_rows=0))
    store.replace_papers(make_rows([chunk(str(i)) for i in range(5)], unit_vectors(5, DIM)))
    store.semantic_candidates(unit_vectors(1, DIM), 3)
    pid = store.conn.info.backend_pid
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        # with a timeout it returns once the backend has ended, not when the signal is sent
        ended = admin.execute("SELECT pg_terminate_backend(%s, 120000)", [pid]).fetchone()[0]
    assert ended
    with pytest.raises(psycopg.OperationalError):  # the call that finds the session gone
        store.semantic_candidates(unit_vectors(1, DIM), 3)
    assert store.semantic_candidates(unit_vectors(1, DIM), 3)[0]  # reconnected
    assert store.conn.info.backend_pid != pid
    assert current(store, "hnsw.ef_search") == "77"


def test_iterative_scan_fills_selective_filtered_queries(make_backend):
    ann = AnnParams(ef_search=10, full_scan_rows=0)
    relaxed = make_backend("pgvector", ann=ann)
    off = make_backend("pgvector", ann=replace(ann, iterative_scan="off"))
    papers = [chunk(str(i), year=2020 if i % 25 == 0 else 1999) for i in range(1_000)]
    rows = make_rows(papers, unit_vectors(1_000, DIM, seed=5))
    where = Filter(min_year=2010)  # 40 of 1,000 chunks
    query, counts = unit_vectors(1, DIM, 6), {}
    for label, store in (("relaxed", relaxed), ("off", off)):
        store.replace_papers(rows)
        store.conn.execute("SET enable_seqscan = off")  # the HNSW walk, not an exact sort
        answered = store.semantic_candidates(query, 10, where)[0]
        walked = store._nearest(query, 10, where, DIM, 10, exact=False)[0]  # the walk alone
        counts[label] = (len(walked), len(answered))
    assert counts["relaxed"] == (10, 10)
    # what the setting is for: a post-filtered walk of 10 runs dry; the exact ask fills it
    assert counts["off"][0] < 10 and counts["off"][1] == 10


@pytest.mark.parametrize("name", ["pgvector", *PG_LAYOUTS])
def test_a_walk_cut_short_by_a_selective_filter_is_answered_exactly(make_backend, name):
    """hnsw.max_scan_tuples ends the walk before n rows pass a 1% filter (bench_filters: 30 of 60
    rows at 0.15% of 250k chunks); the answer is still the exact top n of the matching rows."""
    dim, n = 16, 20
    vectors = clustered(3_000, dim)
    rare = range(0, 3_000, 100)
    # an effort below the rows the walk needs, so that max_scan_tuples is what ends it
    ann = replace(
        PG_LAYOUTS.get(name, AnnParams()), ef_search=200, full_scan_rows=0, max_scan_tuples=50
    )
    store = make_backend("pgvector", ann=ann)
    papers = [chunk(str(i), year=1990 if i % 100 == 0 else 2020) for i in range(3_000)]
    store.replace_papers(make_rows(papers, vectors))
    store.conn.execute("SET enable_seqscan = off")  # at 3,000 rows the planner would sort them all
    queries = clustered(5, dim, seed=4)
    found = store.semantic_candidates(queries, n, Filter(max_year=1990), stage="semantic")
    for hits, query in zip(found, queries, strict=True):
        wanted = sorted(rare, key=lambda i: -float(vectors[i] @ query))[:n]
        got = [int(h["chunk_id"]) for h in hits]
        if store.layout.quantization == "binary":  # its walk of n x 10 Hamming ties filled up
            assert len(got) == n and set(got) <= set(rare)
        else:
            assert got == wanted
    # fewer matching rows than n: every one of them, nothing made up
    few = store.semantic_candidates(queries[:1], n, Filter(pmids=("0", "100", "7")))[0]
    assert sorted(int(h["chunk_id"]) for h in few) == [0, 7, 100]
