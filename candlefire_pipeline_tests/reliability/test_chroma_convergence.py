"""Fault: a real `chroma run` killed at each point of a batch apply; the store converges alone.

The apply of batch b2 is cut by SIGKILL to the server (i) after the first upsert slice, (ii)
after every upsert but before the paper's stale chunks are deleted -- the two steps of Chroma's
replace-by-paper -- and (iii) before the batch's DeleteCitation deletes. After a restart on the
same path and port, either the next apply of ANOTHER batch finishes b2 first, or
`candlefire repair --store chroma` reports the leftovers and `--apply` fixes them.
"""

from __future__ import annotations

import httpx
import pytest

from candlefire_pipeline.backends.chroma.backend import ChromaBackend
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline_tests.operations.batches import apply, paper, write_batch
from candlefire_pipeline_tests.reliability.helpers import ChromaServer

SLICE = 200  # upsert slice size (the server's 5,461 would need 5,462+ rows for two slices)
COLLECTION = "convergence"
PMIDS = [str(n) for n in range(1, 151)]


class KillAt:
    """The collection, except that the server is SIGKILLed around the n-th call of `method`."""

    def __init__(self, collection, server: ChromaServer, method: str, call: int, after: bool):
        self._collection, self._server = collection, server
        self._method, self._call, self._after = method, call, after
        self.calls = 0

    def __getattr__(self, name):
        real = getattr(self._collection, name)
        if name != self._method:
            return real

        def wrapped(**kwargs):
            self.calls += 1
            if self.calls == self._call and not self._after:
                self._server.kill()
            result = real(**kwargs)
            if self.calls == self._call and self._after:
                self._server.kill()
            return result

        return wrapped


def full_text_update(batches):
    write_batch(batches, "b2", [paper(p, "v2", sections=2) for p in PMIDS])  # 450 rows


def update_with_deletes(batches):
    write_batch(batches, "b2", [paper(p, "v2") for p in PMIDS[:100]], deletes=PMIDS[100:])


# (case, b2 writer, method, call number, kill after the call returns)
KILL_POINTS = [
    ("after the first upsert slice", full_text_update, "upsert", 1, True),
    ("between the upserts and the stale-chunk delete", full_text_update, "delete", 1, False),
    ("before the batch's DeleteCitation deletes", update_with_deletes, "delete", 1, False),
]


@pytest.fixture
def chroma_server(tmp_path):
    server = ChromaServer(tmp_path / "chroma", tmp_path / "chroma.log")
    server.start()
    try:
        yield server
    finally:
        server.kill()


def crash_b2(server, batches, monkeypatch, write_b2, method, call, after) -> ChromaBackend:
    """b1 applied, then b2's apply cut by the kill; the server is back up when this returns."""
    chroma = build_backend("chroma", host=server.host, port=server.port, collection=COLLECTION)
    monkeypatch.setattr(chroma._client, "get_max_batch_size", lambda: SLICE)
    write_batch(batches, "b1", [paper(p) for p in PMIDS])
    apply(chroma, batches, "b1")
    write_b2(batches)
    faulty = KillAt(chroma._collection, server, method, call, after)
    monkeypatch.setattr(chroma, "_collection", faulty)
    with pytest.raises(httpx.ConnectError):
        apply(chroma, batches, "b2")
    assert faulty.calls == call + after  # killed after call n: call n + 1 is the one refused
    server.start()  # same path, same port: the client object reconnects
    monkeypatch.setattr(chroma, "_collection", faulty._collection)
    assert StoreLedger(batches, "chroma").interrupted() == ["b2"]
    assert "b2" not in StoreLedger(batches, "chroma").applied()
    assert chroma.chunk_hashes() != expected_chunks(batches)  # the cut left a gap
    return chroma


@pytest.mark.parametrize(
    "case, write_b2, method, call, after", KILL_POINTS, ids=[k[0] for k in KILL_POINTS]
)
def test_next_apply_of_another_batch_converges(
    chroma_server, tmp_path, monkeypatch, case, write_b2, method, call, after
):
    batches = tmp_path / "batches"
    chroma = crash_b2(chroma_server, batches, monkeypatch, write_b2, method, call, after)
    write_batch(batches, "b3", [paper("900")])
    summary = apply(chroma, batches, "b3")
    assert summary.resumed == ("b2",)
    assert StoreLedger(batches, "chroma").interrupted() == []
    assert sorted(StoreLedger(batches, "chroma").applied()) == ["b1", "b2", "b3"]
    assert chroma.chunk_hashes() == expected_chunks(batches)
    chroma.close()


def test_repair_command_reports_then_fixes_the_leftovers(
    chroma_server, tmp_path, monkeypatch, capsys
):
    data = tmp_path / "data"
    for key, value in {
        "CANDLEFIRE_DATA_DIR": str(data),
        "CANDLEFIRE_CHROMA_HOST": chroma_server.host,
        "CANDLEFIRE_CHROMA_PORT": str(chroma_server.port),
        "CANDLEFIRE_CHROMA_COLLECTION": COLLECTION,
    }.items():
        monkeypatch.setenv(key, value)
    batches = data / "batches"
    chroma = crash_b2(chroma_server, batches, monkeypatch, full_text_update, "delete", 1, False)
    chroma.close()

    assert candlefire(["repair", "--store", "chroma"]) == 1
    out = capsys.readouterr().out
    assert "repair chroma (dry run)" in out and "interrupted applies: b2" in out
    assert "orphaned: 150 (1, 10, 100, 101, 102, ... (145 more))" in out  # v1's bare-pmid ids
    assert "missing: 0" in out and "run again with --apply" in out

    assert candlefire(["repair", "--store", "chroma", "--apply"]) == 0
    out = capsys.readouterr().out
    assert "1 interrupted batches finished" in out
    assert "after: missing 0, stale 0, orphaned 0" in out
    assert candlefire(["repair", "--store", "chroma"]) == 0
    assert "nothing to do" in capsys.readouterr().out

    check = build_backend(
        "chroma", host=chroma_server.host, port=chroma_server.port, collection=COLLECTION
    )
    assert check.chunk_hashes() == expected_chunks(batches)
    check.close()


def test_repair_command_with_the_server_down_fails_clearly(
    chroma_server, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDLEFIRE_CHROMA_HOST", chroma_server.host)
    monkeypatch.setenv("CANDLEFIRE_CHROMA_PORT", str(chroma_server.port))
    chroma_server.kill()
    assert candlefire(["repair", "--store", "chroma"]) == 2
    err = capsys.readouterr().err
    assert "cannot open Chroma at" in err and "Traceback" not in err
