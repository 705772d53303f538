"""Text that parses and is accepted is stored and read back exactly, by every backend."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.operations.indexing import read_store_rows
from candlefire_pipeline_tests.corpus.bad_inputs import WRITABLE_ODDITIES
from candlefire_pipeline_tests.operations.batches import paper, write_batch

#: Each odd piece on its own, as a substring to search for.
PIECES = ["\ufffe", "\U0010ffff", "\u2028", "\x01", "\x7f", "\u202e", "e\u0301", "\U0001f600"]


@pytest.fixture(scope="module")
def odd_batch(tmp_path_factory):
    batches = tmp_path_factory.mktemp("odd") / "batches"
    odd = paper(
        "1",
        title=f"SOD1 {WRITABLE_ODDITIES}",
        abstract=f"abstract {WRITABLE_ODDITIES} end",
        full_text=f"[Introduction]\n{WRITABLE_ODDITIES}\n[Results]\nplain",
        entity_names=[WRITABLE_ODDITIES, "SOD1"],
        mesh_terms=[WRITABLE_ODDITIES],
        doi=f"10.1/{WRITABLE_ODDITIES}",
    )
    batch_dir = write_batch(batches, "b1", [odd, paper("2")])
    return batch_dir, pq.read_table(batch_dir / "chunks.parquet").to_pylist()


def test_accepted_odd_text_round_trips_in_every_store(backend, odd_batch):
    batch_dir, chunks = odd_batch
    rows = read_store_rows(batch_dir, "b1")
    assert backend.replace_papers(rows) == len(chunks) == 4
    assert backend.chunk_hashes() == {c["chunk_id"]: c["content_hash"] for c in chunks}
    fetched = backend.fetch(Filter(pmids=("1",)))
    assert [r["document"] for r in fetched] == [c["document"] for c in chunks if c["pmid"] == "1"]
    for row in fetched:
        assert row["title"] == f"SOD1 {WRITABLE_ODDITIES}"
        assert row["doi"] == f"10.1/{WRITABLE_ODDITIES}"
        assert row["entity_names"] == f"{WRITABLE_ODDITIES},SOD1"


@pytest.mark.parametrize("piece", PIECES, ids=[f"U+{ord(p[-1]):04X}" for p in PIECES])
def test_odd_characters_are_found_by_substring_search_in_every_store(backend, odd_batch, piece):
    batch_dir, chunks = odd_batch
    backend.replace_papers(read_store_rows(batch_dir, "b1"))
    holders = {c["pmid"] for c in chunks if piece in c["document"]}
    assert holders == {"1"}
    assert backend.contains([piece])
    assert backend.contains([piece], Filter(abstract_only=True))
    vector = read_store_rows(batch_dir, "b1")["embedding"][0].values.to_numpy()
    (hits,) = backend.substring_candidates([piece], vector[None, :], 10)
    assert {h["pmid"] for h in hits} == holders
