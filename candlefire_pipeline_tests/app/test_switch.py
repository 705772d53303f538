"""The serving collection follows the switch as the reader does, through the operator's commands
on a real deployment: promote, rollback (the next call reads the other store), a generation
promoted (its own table and model), the switch file broken, the lever, a store that cannot be
opened; one call always reads one store, even when the switch moves during it."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from candlefire_pipeline.app.collection import ServingCollection
from candlefire_pipeline.app.stores import open_store
from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.parity import open_named_stores, run_report
from candlefire_pipeline.operations.serving.commands import Order, promote, rollback
from candlefire_pipeline.operations.serving.follow import ServingRefusedError
from candlefire_pipeline.operations.serving.state import Target
from candlefire_pipeline.parity.report.files import write_report
from candlefire_pipeline.settings import ParityThresholds
from candlefire_pipeline_tests.app.corpus import promote_directly
from candlefire_pipeline_tests.generations.deployment import build, deploy, drop_tables
from candlefire_pipeline_tests.latency import ignore_machine_latency

QUESTION = dict(query_texts=["SPG302 restores synapses in ALS"], n_results=8,
                include=["metadatas", "distances"])  # fmt: skip
CHROMA, PGVECTOR = Target("chroma"), Target("pgvector")


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, pg_dsn):
    """The demo drops in every store (hashing-v1, 64-dim) and a parity report passing every
    gate; the switch is reset before each test."""
    monkeypatch = pytest.MonkeyPatch()
    ignore_machine_latency(monkeypatch)  # a property of this shared machine, not of the index
    monkeypatch.setenv("CANDLEFIRE_STORES", "pgvector,chroma")  # the pair the switch flips
    settings = deploy(monkeypatch, tmp_path_factory.mktemp("app-switch"), pg_dsn)
    embedder = embedder_for(settings, "query")
    with open_named_stores(settings) as stores:
        write_report(run_report(settings, embedder, stores), settings.reports_dir)
    yield settings
    drop_tables(settings)
    monkeypatch.undo()


@pytest.fixture
def settings(deployment):
    for path in (deployment.serving_file, deployment.serving_pending_file):
        path.unlink(missing_ok=True)
    return deployment


class Opened:
    """An opener that records what it opened (and can be told to fail, or to act mid-call)."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.fail: set[str] = set()
        self.during_query = None

    def __call__(self, target, view, embedder):
        self.log.append(str(target))
        if target.backend in self.fail:
            raise BackendUnavailableError(f"{target.backend} is down (test)")
        store = open_store(target, view, embedder)
        if self.during_query is not None:
            real, hook = store.query, self.during_query

            def query(call, vectors):
                hook()
                return real(call, vectors)

            store.query = query
        return store


def ids(answer: dict) -> list[str]:
    return answer["ids"][0]


def alone(settings, backend: str) -> dict:
    """The question answered by one store, forced through the lever."""
    with ServingCollection(replace(settings, serving_override=backend)) as collection:
        answer = collection.query(**QUESTION)
        assert collection.target.backend == backend
        return answer


def test_the_collection_follows_promote_and_rollback_call_by_call(settings):
    opened = Opened()
    with ServingCollection(settings, opener=opened) as collection:
        on_chroma = collection.query(**QUESTION)
        assert collection.target == CHROMA and ids(on_chroma)
        promoted = promote(settings, Order("promote", "app test", "tester"))
        assert promoted.decision.outcome == "changed"
        on_pg = collection.query(**QUESTION)
        assert collection.target == PGVECTOR
        assert on_chroma == alone(settings, "chroma") and on_pg == alone(settings, "pgvector")
        count = collection.count()
        rollback(settings, Order("rollback", "app test rollback", "tester"))
        assert collection.target == PGVECTOR  # not re-read until the next call
        assert collection.count() == count and collection.target == CHROMA
        rollback(settings, Order("rollback", "pinned again: same target, new file", "tester"))
        assert ids(collection.query(**QUESTION)) == ids(on_chroma)
    assert opened.log == ["chroma/default", "pgvector/default", "chroma/default"]


def test_one_call_reads_one_store_even_when_the_switch_moves_during_it(settings):
    promote(settings, Order("promote", "app test", "tester"))
    opened = Opened()
    with ServingCollection(settings, opener=opened) as collection:
        expected = collection.query(**QUESTION)
        opened.during_query = lambda: rollback(
            settings, Order("rollback", "mid-call rollback", "tester")
        )
        collection.close()  # reopen through the hook
        answer = collection.query(**QUESTION)
        assert collection.target == PGVECTOR and answer == expected  # all of it from pgvector
        opened.during_query = None
        assert collection.get(limit=3, include=[])["ids"] and collection.target == CHROMA


def test_a_broken_switch_serves_chroma_and_says_so(settings, caplog):
    promote(settings, Order("promote", "app test", "tester"))
    settings.serving_file.write_text('{"backend": "pgvector", "state": "nonsense"')
    with ServingCollection(settings) as collection, caplog.at_level(logging.ERROR):
        assert collection.count() > 0 and collection.target == CHROMA
        assert "not valid JSON" in caplog.text
        promote_directly(settings)  # a valid file again (an operator's fix): the next call follows
        collection.count()
        assert collection.target == PGVECTOR


def test_the_emergency_lever_forces_chroma_and_refuses_pgvector_without_a_passing_report(
    settings,
):
    promote(settings, Order("promote", "app test", "tester"))
    with ServingCollection(replace(settings, serving_override="chroma")) as collection:
        collection.count()
        assert collection.target == CHROMA
    rollback(settings, Order("rollback", "pinned", "tester"))
    forced = replace(settings, serving_override="pgvector")
    with ServingCollection(forced) as collection:
        collection.count()
        assert collection.target == PGVECTOR
    strict = replace(forced, parity=ParityThresholds(min_corpus_chunks=1_000_000))
    with ServingCollection(strict) as collection:
        with pytest.raises(ServingRefusedError, match="failed gates: .*corpus_size"):
            collection.query(**QUESTION)


def test_a_store_that_cannot_be_opened_keeps_the_old_one_and_is_tried_again(settings):
    opened = Opened()
    with ServingCollection(settings, opener=opened) as collection:
        collection.count()
        promote(settings, Order("promote", "app test", "tester"))
        opened.fail.add("pgvector")
        with pytest.raises(BackendUnavailableError, match="pgvector is down"):
            collection.count()
        assert collection.target == CHROMA  # nothing half-switched
        opened.fail.clear()
        collection.count()
        assert collection.target == PGVECTOR
    assert opened.log == ["chroma/default", "pgvector/default", "pgvector/default"]


def test_a_promoted_generation_is_read_with_its_own_table_and_model(settings, capsys):
    """Last in the module: the generation stays registered."""
    from candlefire_pipeline.operations.generations.lifecycle import create_generation

    promote(settings, Order("promote", "the default first", "tester"))
    generation = create_generation(settings, "dim48", "hashing-v1:48")
    build(settings, generation)
    assert candlefire(["generation", "compare", "dim48"]) == 0
    with ServingCollection(settings) as collection:
        default = collection.query(**{**QUESTION, "include": ["embeddings"]})
        assert default["embeddings"][0].shape[1] == 64
        args = ["promote", "--generation", "dim48", "--reason", "serve dim48", "--by", "oncall"]
        assert candlefire(args) == 0, capsys.readouterr()
        answer = collection.query(**{**QUESTION, "include": ["embeddings", "distances"]})
        assert collection.target == Target("pgvector", "dim48")
        assert answer["embeddings"][0].shape[1] == 48 and ids(answer)  # its own query vectors
        assert collection.count() == len(collection.get(include=[])["ids"])
        rollback(settings, Order("rollback", "drill", "oncall"))
        again = collection.query(**{**QUESTION, "include": ["embeddings"]})
        assert collection.target == PGVECTOR and ids(again) == ids(default)
        assert again["embeddings"][0].shape[1] == 64
