"""The unretire benchmark's ledger: the workload written as batch files the pipeline's own readers
take (the ledger's current versions are the workload's chunks, each batch's store rows its
slice), and the retired state it sets up is one `unretire` brings back, with Chroma's folder
deleted or kept (real Chroma, real pgvector, the product's unretire)."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from benchmarks.retirement.ledger import drop_rows, forget_store, retire_chroma, write_batches
from benchmarks.retirement.parts import PartTimer
from benchmarks.retirement.rebuild_cost import deployment
from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA
from candlefire_pipeline.operations.indexing import apply_batch, read_store_rows
from candlefire_pipeline.operations.retirement import commands
from candlefire_pipeline.operations.serving.commands import Order
from candlefire_pipeline.operations.serving.machine import CHANGED
from candlefire_pipeline.operations.serving.state import read_state
from candlefire_pipeline.settings import Settings

ROWS, PER_DROP = 600, 200


@pytest.fixture
def workload(scaled_corpus):
    """(the first ROWS-odd chunks as whole-paper slices of ~PER_DROP rows, all their rows)."""
    scale, _ = scaled_corpus
    slices = []
    for part in scale.slices(rows=PER_DROP):
        slices.append(part)
        if sum(s.num_rows for s in slices) >= ROWS:
            break
    return slices, pa.concat_tables(slices)


def test_the_batches_hold_the_workload_as_the_pipelines_readers_see_it(workload, tmp_path):
    slices, rows = workload
    keys = write_batches(slices, tmp_path)
    assert keys == ["drop-0001", "drop-0002", "drop-0003"]
    wanted = dict(zip(rows["chunk_id"].to_pylist(), rows["content_hash"].to_pylist(), strict=True))
    assert expected_chunks(tmp_path) == wanted
    for key, part in zip(keys, slices, strict=True):
        read = read_store_rows(tmp_path / key, key)
        assert read.select(CHUNK_SCHEMA.names).equals(part.select(CHUNK_SCHEMA.names))
        assert read["embedding"].equals(part["embedding"])  # no re-embedding: the same vectors
        papers = pq.read_table(tmp_path / key / "papers.parquet")
        assert sorted(papers["pmid"].to_pylist()) == sorted(pc.unique(part["pmid"]).to_pylist())
        assert pq.read_table(tmp_path / key / "deleted.parquet").num_rows == 0


def test_a_drop_that_cuts_a_paper_is_refused(workload, tmp_path):
    _, rows = workload
    pmid = rows.filter(pc.equal(rows["chunk_index"], 1))["pmid"][0]  # a paper of 2+ chunks
    head = pc.and_(pc.equal(rows["pmid"], pmid), pc.equal(rows["chunk_index"], 0))
    headless = rows.filter(pc.invert(head))  # its chunk 0 in another drop
    with pytest.raises(ValueError, match="every paper needs its chunk 0 in the same drop"):
        write_batches([headless], tmp_path)


@pytest.mark.parametrize(
    ("size", "drops", "rows"), [(62_196, 10, 6_220), (250_000, 10, 25_000), (10, 10, 1)]
)
def test_rows_per_drop(size, drops, rows):
    assert drop_rows(size, drops) == rows


@pytest.mark.parametrize(("size", "drops"), [(5, 10), (100, 0)])
def test_drops_that_cannot_be_made_are_refused(size, drops):
    with pytest.raises(ValueError, match=f"{size} chunks cannot make {drops} drops"):
        drop_rows(size, drops)


def test_the_environment_gives_a_command_the_deployments_settings(tmp_path, monkeypatch):
    settings, env = deployment(tmp_path, "postgresql://bench@localhost/db", 600)
    monkeypatch.setattr(os, "environ", env)
    again = Settings.from_env()
    for name in ("data_dir", "pg_dsn", "pg_table", "chroma_host", "stores", "chroma_collection",
                 "batches_dir", "chroma_path", "serving_file"):  # fmt: skip
        assert getattr(again, name) == getattr(settings, name), name


def unretire(settings) -> tuple[object, int]:
    """The product's unretire; (its outcome, the chunks its rebuild passes wrote)."""
    timer = PartTimer()
    with timer.timing(commands, ("rebuild",)):
        outcome = commands.unretire(
            settings, "chroma", Order("unretire", "test: the way back", "tester")
        )
    return outcome, sum(report.rows_written for report in timer.results["rebuild"])


def test_the_retired_state_is_one_unretire_brings_back(workload, tmp_path, pg_dsn):
    slices, rows = workload
    settings, _ = deployment(tmp_path, pg_dsn, 600)
    keys = write_batches(slices, settings.batches_dir)
    model = (rows["model_id"][0].as_py(), rows.schema.field("embedding").type.list_size)
    template = tmp_path / "chroma-at-retirement"
    with opened_backend("pgvector", settings) as pg:
        pg.reset()
        for key in keys:
            apply_batch(pg, settings.batches_dir, key, *model)
    with opened_backend("chroma", settings) as chroma:
        for key in keys[:2]:
            apply_batch(chroma, settings.batches_dir, key, *model)
    shutil.copytree(settings.chroma_path, template)
    try:
        for folder, written in ((None, rows.num_rows), (template, slices[2].num_rows)):
            retire_chroma(settings, keys[2:], folder)
            ledger = StoreLedger(settings.batches_dir, "chroma")
            assert (sorted(ledger.applied()), ledger.passed_over()) == (keys[:2], keys[2:])
            assert read_state(settings.serving_file).reference_retired is not None
            assert settings.chroma_path.exists() == (folder is not None)
            outcome, rewritten = unretire(settings)
            assert outcome.decision.outcome == CHANGED and outcome.state.retired == {}
            assert rewritten == written  # deleted: everything; kept: the passed-over drop
            with opened_backend("chroma", settings) as chroma:
                assert chroma.chunk_hashes() == expected_chunks(settings.batches_dir)
        forget_store(settings.batches_dir, keys, "chroma")
        assert StoreLedger(settings.batches_dir, "chroma").applied() == {}
        assert sorted(StoreLedger(settings.batches_dir, "pgvector").applied()) == keys
    finally:
        with opened_backend("pgvector", settings) as pg:
            pg.reset()
