"""Conformance holds through the term cache: cold (every term computed and kept), warm (every
recurring term a lookup), and after drops that add a holder of a kept variant, delete a
witness, delete a listed member and replace a paper, then restore the recorded corpus."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from candlefire_pipeline.parity.conformance.check import run_conformance
from candlefire_pipeline.retrieval.retriever import Retriever
from candlefire_pipeline_tests.backends.pg.terms.helpers import differences, kept, valid


def paper_rows(rows: pa.Table, pmids) -> pa.Table:
    return rows.filter(pc.is_in(rows["pmid"], value_set=pa.array(sorted(pmids), pa.string())))


def conforms(store, conformance, embedder, exact):
    result = run_conformance("pgvector", Retriever(store, embedder), conformance, exact)
    assert result.failures == [], result.failures[:3]
    assert result.queries == len(conformance.queries) == 110
    return result


@pytest.fixture
def store(make_backend, conformance_rows):
    store = make_backend("pgvector")
    store.replace_papers(conformance_rows)
    return store


def test_conformance_cold_warm_and_after_drops_through_the_cache(
    store, conformance, conformance_rows, conformance_embedder, conformance_exact
):
    conforms(store, conformance, conformance_embedder, conformance_exact)  # cold
    cold = store.terms.stats.misses
    assert cold > 0 and store.terms.stats.kept > 0
    conforms(store, conformance, conformance_embedder, conformance_exact)  # warm
    assert store.terms.stats.misses == cold  # the second pass computed nothing

    entries = [e for e in kept(store) if e["kind"] == "keyword" and len(e["ids"]) >= 2]
    listed = entries[0]
    member = next(i for i in listed["ids"] if i not in (listed["witness"],))
    by_chunk = dict(zip(conformance_rows["chunk_id"].to_pylist(),
                        conformance_rows["pmid"].to_pylist(), strict=True))  # fmt: skip
    witness = next(e for e in entries if e["abstract_witness"])["abstract_witness"]
    gone = {by_chunk[member], by_chunk[witness]}
    replaced = next(p for p in by_chunk.values() if p not in gone)
    holder = paper_rows(conformance_rows, [replaced])
    documents = [f"{d} {listed['text']}" for d in holder["document"].to_pylist()]
    rewritten = holder.set_column(holder.schema.get_field_index("document"), "document",
                                  pa.array(documents, pa.string()))  # fmt: skip

    store.delete_papers(sorted(gone))  # a witness and a listed member go
    assert differences(store) == []
    store.replace_papers(rewritten)  # a paper now holds a kept variant everywhere
    assert store.last_upkeep.changed > 0 and differences(store) == []
    store.replace_papers(paper_rows(conformance_rows, gone | {replaced}))  # the corpus restored
    assert differences(store) == [] and valid(store) and not store.last_upkeep.cleared

    misses = store.terms.stats.misses
    conforms(store, conformance, conformance_embedder, conformance_exact)
    # only entries the deletes shortened below a request's 18 rows were computed again
    assert store.terms.stats.misses - misses < cold / 4
