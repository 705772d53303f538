"""Security: search terms are bound parameters and LIKE patterns match only literally."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.common import fold_case
from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline.retrieval.variants import term_variants
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

DOCS = {
    "1": "O'Brien's cohort: 100% of patients improved",
    "2": "gene_name TDP_43 written with underscores",
    "3": "a Windows path C:\\data\\new holds a backslash",
    "4": "statement; -- is not a comment in prose",
    "5": "the string '); DROP TABLE chunks;-- appears literally here",
    "6": "plain text, one hundred percent, no specials at all",
    "7": "50%_off and \\% side by side",
    "8": "Quote ' OR '1'='1 inside a sentence",
}
#: Each would match far more than the literal text (or fail) if it reached SQL unescaped.
TERMS = [
    "'", "%", "_", "\\", ";--", "'); DROP TABLE chunks;--", "%_", "\\%", "100%", "O'Brien",
    "TDP_43", "C:\\data", "' OR '1'='1", "%' OR 1=1 --", "$1", "%s", "%(x)s", "{t}", "_%",
    "o'brien", "ZZZ'; SELECT pg_sleep(0);--",
]  # fmt: skip


def _expected(term: str, mode: str) -> set[str]:
    """PMIDs whose document holds any variant of term, under LIKE or ILIKE semantics."""
    variants = term_variants(term)
    if mode == "ilike":
        return {p for p, d in DOCS.items() if any(fold_case(v) in fold_case(d) for v in variants)}
    return {p for p, d in DOCS.items() if any(v in d for v in variants)}


@pytest.fixture(params=["like", "ilike"])
def store(request, make_backend):
    embedder = HashingEmbedder(dim=64)
    backend = make_backend("pgvector", substring_mode=request.param)
    docs = list(DOCS.items())
    rows = make_rows(
        [chunk(pmid, document=doc) for pmid, doc in docs],
        embedder.embed([doc for _, doc in docs]),
        model_id=embedder.model_id,
    )
    backend.replace_papers(rows)
    return backend, embedder


def _table_intact(backend) -> bool:
    name = backend.names.ident().as_string(backend.conn)
    exists = backend.conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()[0]
    return exists and backend.count() == len(DOCS)


def test_specials_match_only_literally_on_every_read_path(store):
    backend, embedder = store
    mode = backend.substring_mode
    payload = f"'); DROP TABLE {backend.names.table};--"
    for term in [*TERMS, payload]:
        wanted = _expected(term, mode)
        variants = term_variants(term)
        lists = backend.substring_candidates(variants, embedder.embed(variants), 50)
        assert {row["pmid"] for hits in lists for row in hits} == wanted, term
        assert backend.contains(term_variants(term)) == bool(wanted), term
        assert backend.contains([term], Filter(abstract_only=True)) == bool(wanted), term
    assert _table_intact(backend)


def test_retriever_keyword_search_and_grounding_are_literal(store):
    backend, embedder = store
    retriever = Retriever(backend, embedder)
    for term in TERMS:
        wanted = _expected(term, backend.substring_mode)
        found = retriever.search_by_keyword([term], n=20)
        assert {row["pmid"] for row in found} == wanted, term
        grounded = bool(wanted)
        assert retriever.grounding([term]) == {term: {"corpus": grounded, "abstract": grounded}}
    result = retriever.retrieve("patients improved", entity_names=["O'Brien"], terms=TERMS)
    everything = set().union(*(_expected(t, backend.substring_mode) for t in TERMS))
    assert set(result.keyword_pmids) == everything
    assert _table_intact(backend)


def test_the_server_receives_terms_only_as_parameters(store, pg_server):
    """With log_statement=all, the payload shows up in parameter lines, never in SQL text."""
    backend, embedder = store
    payload = f"'); DROP TABLE {backend.names.table};--"
    log = pg_server.data_dir / "log"
    start = log.stat().st_size
    backend.conn.execute("SET log_statement = 'all'")
    try:
        backend.contains([payload])
        backend.substring_candidates([payload], embedder.embed(["q"]), 5)
    finally:
        backend.conn.execute("RESET log_statement")
    with open(log, encoding="utf-8", errors="replace") as handle:
        handle.seek(start)
        lines = handle.readlines()
    # the SQL text names the table as a quoted identifier; the payload holds it LIKE-escaped
    statements = [line for line in lines if f'"{backend.names.table}"' in line]
    assert len(statements) >= 2, "the two statements were not logged"
    assert not any("DROP TABLE" in line for line in statements)
    carrying = [line for line in lines if "DROP TABLE" in line]
    assert carrying and all("DETAIL:  Parameters:" in line for line in carrying), carrying
    assert _table_intact(backend)


@pytest.mark.parametrize(
    ("term", "mode", "pmids"),
    [
        ("%", "like", {"1", "7"}),
        ("_", "like", {"2", "7"}),
        ("\\", "like", {"3", "7"}),
        ("\\%", "like", {"7"}),
        ("o'brien", "like", set()),
        ("o'brien", "ilike", {"1"}),
        ("'); DROP TABLE chunks;--", "like", {"5"}),
        ("%s", "like", set()),
    ],
)
def test_the_oracle_is_literal(term, mode, pmids):
    """Guards the tests above: a match-all pattern would return all eight documents."""
    assert _expected(term, mode) == pmids
