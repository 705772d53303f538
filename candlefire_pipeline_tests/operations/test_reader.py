"""The app-facing read path: a Retriever on the backend the switch names, re-read when the
switch changes; CANDLEFIRE_SERVING_BACKEND as an emergency lever, refused for pgvector unless
the latest report passes every gate."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from candlefire_pipeline.backends.chroma.backend import ChromaBackend
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.operations.reader import ServingReader, ServingRefusedError
from candlefire_pipeline.operations.serving.commands import Order, promote, rollback
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.defs.pipeline_harness import demo_deployment

QUERY = ("SPG302 restores synapses in ALS", ["TDP-43"], ["SPG302"])


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, pg_dsn):
    """The first demo drop in both stores and one parity report that passes every gate."""
    monkeypatch = pytest.MonkeyPatch()
    yield demo_deployment(monkeypatch, tmp_path_factory.mktemp("reader"), pg_dsn)
    monkeypatch.undo()


@pytest.fixture
def settings(deployment):
    """A never-promoted switch before each test (the stores and the report are shared)."""
    settings, _ = deployment
    for path in (settings.serving_file, settings.serving_pending_file):
        path.unlink(missing_ok=True)
    return settings


def opened(settings, log: list[str]):
    def opener(name, settings_):
        log.append(name)
        return open_backend(name, settings_)

    return opener


def test_the_reader_follows_the_switch_and_reopens_only_when_it_changes(settings, deployment):
    log: list[str] = []
    with ServingReader(settings, deployment[1], opener=opened(settings, log)) as reader:
        first = reader.retriever()
        assert isinstance(first.backend, ChromaBackend) and reader.backend_name == "chroma"
        assert reader.retriever() is first  # the file did not change: no reopen
        chroma_pmids = first.retrieve(*QUERY).pmids

        promoted = promote(settings, Order("promote", "reader test", "tester"))
        assert promoted.decision.outcome == "changed"
        second = reader.retriever()
        assert isinstance(second.backend, PgVectorBackend) and reader.backend_name == "pgvector"
        assert second.retrieve(*QUERY).pmids == chroma_pmids  # the stores agree

        rollback(settings, Order("rollback", "reader test rollback", "tester"))
        assert reader.backend_name == "pgvector"  # not re-read until the next request
        assert isinstance(reader.retriever().backend, ChromaBackend)
        rollback(settings, Order("rollback", "pinned again: same backend, new file", "tester"))
        third = reader.retriever()
        assert reader.state.reason == "pinned again: same backend, new file"
        assert isinstance(third.backend, ChromaBackend)
    assert log == ["chroma", "pgvector", "chroma"]


def test_forcing_chroma_always_works(settings, deployment):
    promote(settings, Order("promote", "promoted", "tester"))
    forced = replace(settings, serving_override="chroma")
    with ServingReader(forced, deployment[1]) as reader:
        assert isinstance(reader.retriever().backend, ChromaBackend)


def test_forcing_pgvector_needs_a_report_passing_every_gate(settings, deployment):
    rollback(settings, Order("rollback", "pinned", "tester"))
    forced = replace(settings, serving_override="pgvector")
    with ServingReader(forced, deployment[1]) as reader:
        assert isinstance(reader.retriever().backend, PgVectorBackend)
    strict = replace(forced, parity=ParityThresholds(min_corpus_chunks=1_000_000))
    with ServingReader(strict, deployment[1]) as reader:
        with pytest.raises(ServingRefusedError, match="failed gates: .*corpus_size"):
            reader.retriever()
    empty = replace(forced, data_dir=settings.data_dir / "elsewhere")  # no report there
    with ServingReader(empty, deployment[1]) as reader:
        with pytest.raises(ServingRefusedError, match="no parity report"):
            reader.retriever()


def test_an_unreadable_switch_serves_chroma_and_says_so(settings, deployment, caplog):
    settings.serving_file.write_text('{"backend": "pgvector", "state": "nonsense"')
    with ServingReader(settings, deployment[1]) as reader, caplog.at_level(logging.ERROR):
        assert isinstance(reader.retriever().backend, ChromaBackend)
    assert "not valid JSON" in caplog.text


def test_query_follows_the_switch_by_default(settings, capsys, monkeypatch):
    args = ["query", QUERY[0], "--entity", "TDP-43", "--term", "SPG302"]
    assert candlefire(args) == 0
    chroma_out = capsys.readouterr().out.splitlines()
    assert chroma_out[0].startswith("serving backend: chroma")
    promote(settings, Order("promote", "query test", "tester"))
    assert candlefire(args) == 0
    pg_out = capsys.readouterr().out.splitlines()
    assert pg_out[0].startswith("serving backend: pgvector")
    strip = [line for line in pg_out[1:] if not line.startswith("timings")]
    assert strip == [line for line in chroma_out[1:] if not line.startswith("timings")]

    rollback(settings, Order("rollback", "query test rollback", "tester"))
    monkeypatch.setenv("CANDLEFIRE_SERVING_BACKEND", "pgvector")
    monkeypatch.setenv("CANDLEFIRE_PARITY_MIN_CHUNKS", "1000000")  # the report now fails
    assert candlefire(args) == 2
    out, err = capsys.readouterr()
    assert "CANDLEFIRE_SERVING_BACKEND=pgvector refused" in err and "Traceback" not in err
