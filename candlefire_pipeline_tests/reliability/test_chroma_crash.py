"""Fault: the Chroma server dies between two upsert slices of one replace_papers call."""

from __future__ import annotations

import httpx
import pytest

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.corpus.ledger import diff_inventory
from candlefire_pipeline.defs.resources import ChromaResource, PgVectorResource, PipelineResource
from candlefire_pipeline.defs.stores.checks import stores_agree
from candlefire_pipeline_tests.reliability.helpers import (
    ChromaServer,
    expected_hashes,
    paper_rows,
)

#: Upsert slice size for the test (the server's 5,461 would need 5,462+ rows for two slices).
SLICE = 200
COLLECTION = "faults"


class KillAfterFirstUpsert:
    """The collection, except that the server is killed right after the first upsert returns."""

    def __init__(self, collection, server: ChromaServer) -> None:
        self._collection, self._server = collection, server
        self.upserts = 0

    def upsert(self, **kwargs):
        self.upserts += 1
        result = self._collection.upsert(**kwargs)
        if self.upserts == 1:
            self._server.kill()
        return result

    def __getattr__(self, name):
        return getattr(self._collection, name)


def _stores_agree(pg, server: ChromaServer):
    """The real blocking asset check, invoked directly on the two stores (Chroma not retired:
    the data dir holds no switch file)."""
    return stores_agree(
        pipeline=PipelineResource(data_dir=str(server.path.parent / "data")),
        pgvector=PgVectorResource(dsn=pg._dsn, table=pg.names.table),
        chroma=ChromaResource(host=server.host, port=server.port, collection=COLLECTION),
    )


@pytest.fixture
def chroma_server(tmp_path):
    server = ChromaServer(tmp_path / "chroma", tmp_path / "chroma.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def test_chroma_killed_mid_upsert_is_caught_by_the_hash_check_and_rerun_converges(
    chroma_server, make_backend, monkeypatch
):
    chroma = build_backend(
        "chroma", host=chroma_server.host, port=chroma_server.port, collection=COLLECTION
    )
    pg = make_backend("pgvector")  # the store that got the whole batch
    monkeypatch.setattr(chroma._client, "get_max_batch_size", lambda: SLICE)
    pmids = [str(n) for n in range(1, 151)]
    v1, v2 = paper_rows(pmids, "v1"), paper_rows(pmids, "v2", sections=3)  # 150, 450 rows
    for store in (chroma, pg):
        store.replace_papers(v1)
    pg.replace_papers(v2)

    faulty = KillAfterFirstUpsert(chroma._collection, chroma_server)
    monkeypatch.setattr(chroma, "_collection", faulty)
    with pytest.raises(httpx.ConnectError, match="refused"):
        chroma.replace_papers(v2)
    assert faulty.upserts == 2  # the first slice was written, the second one failed
    # the caller did not swallow it: Chroma's own check sees the gap with the server down too
    with pytest.raises(httpx.ConnectError):
        chroma.count()

    chroma_server.start()  # same path, same port: the client object reconnects
    monkeypatch.setattr(chroma, "_collection", faulty._collection)
    held = chroma.chunk_hashes()
    gap = diff_inventory(expected_hashes(v2), held).as_dict()
    assert len(gap["missing"]) == v2.num_rows - SLICE  # the slices never sent
    assert set(gap["orphaned"]) == set(pmids)  # v1's bare-pmid chunks were never deleted
    assert gap == diff_inventory(pg.chunk_hashes(), held).as_dict()
    check = _stores_agree(pg, chroma_server)
    assert not check.passed  # the blocking check that gates the flip catches it
    assert (check.metadata["missing"].value, check.metadata["orphaned"].value) == (
        len(gap["missing"]),
        len(pmids),
    )
    assert set(chroma.paper_hashes()) == set(pmids)  # no paper lost all of its chunks

    assert chroma.replace_papers(v2) == v2.num_rows  # same ids: the re-run is idempotent
    assert chroma.chunk_hashes() == expected_hashes(v2) == pg.chunk_hashes()
    assert chroma.count() == v2.num_rows
    assert _stores_agree(pg, chroma_server).passed
    chroma.close()
