"""Every surface of a retired Chroma: status, maintain, query, repair, the reader, the shadow
targets, `generation list` / gc. Each says it is retired and none opens it (its folder is never
made again); a generation gc dropped reads the same way in status. Real stores, empty or small."""

from __future__ import annotations

from dataclasses import replace

import pytest

from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.embedding import load_embedder
from candlefire_pipeline.operations.generations.gc import apply_gc, plan_gc
from candlefire_pipeline.operations.generations.lifecycle import create_generation
from candlefire_pipeline.operations.maintenance import maintain
from candlefire_pipeline.operations.reader import ServingReader, ServingRefusedError
from candlefire_pipeline.operations.retirement import files
from candlefire_pipeline.operations.serving.state import PROMOTED, Retirement, ServingState
from candlefire_pipeline.operations.shadow.served import shadow_targets
from candlefire_pipeline.operations.status import collect_status, format_status
from candlefire_pipeline_tests.defs.pipeline_harness import pipeline_env
from candlefire_pipeline_tests.generations.deployment import drop_tables

SINCE = "2026-02-20T00:00:00+00:00"
RETIRED = ServingState(PROMOTED, SINCE, "r-1", "set up", "tester", "setup",
                       retired={"chroma": Retirement(SINCE, "r-soak", 21.5)})  # fmt: skip


@pytest.fixture
def retired(tmp_path, monkeypatch, pg_dsn):
    """Empty stores, Chroma retired with its folder deleted (it never existed here)."""
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    settings.serving_file.write_text(RETIRED.to_json())
    yield settings
    drop_tables(settings)
    assert not settings.chroma_path.exists()  # nothing opened it, whatever the test did


def test_status_says_retired_and_a_dropped_generation_reads_the_same_way(retired, capsys):
    export = files.export_ledger(retired, "chroma", RETIRED.reference_retired)
    create_generation(retired, "old", "hashing-v1:32")
    assert apply_gc(retired, plan_gc(retired, 0), lambda _: None) == ["old"]
    text = format_status(collect_status(retired))
    said = (
        f"chroma: RETIRED - since {SINCE} (report r-soak), not written; files deleted (ledger "
        f"state exported to {export}); `candlefire unretire chroma"
    )
    lines = text.splitlines()
    [chroma] = [line for line in lines if line.startswith("chroma: ")]  # no count, no UNREACHABLE
    assert chroma.startswith(said)
    dropped = next(line for line in lines if line.startswith("generation old:"))
    assert dropped.startswith("generation old: DROPPED - since ") and ", not written; " in dropped
    assert "a rollback has nowhere to go (chroma retired since" in lines[2]
    retired.chroma_path.mkdir()
    (retired.chroma_path / "chroma.sqlite3").write_bytes(b"x" * 2_000_000)
    assert "files kept in" in format_status(collect_status(retired)) and "(2.0 MB)" in (
        format_status(collect_status(retired))
    )
    files.delete_files(retired, "chroma", lambda _: None)
    assert candlefire(["generation", "list"]) == 0
    assert "chroma" not in capsys.readouterr().out


def test_maintain_query_and_repair_leave_a_retired_store_alone(retired, capsys):
    report = maintain(retired)
    chroma = next(h for h in report.stores if h.store == "chroma")
    assert chroma.notes == [f"chroma retired since {SINCE} (report r-soak), not written: "
                            "not checked"] and not report.failed  # fmt: skip
    for args in (["query", "SOD1", "--backend", "chroma"], ["repair", "--store", "chroma"]):
        assert candlefire(args) == 2
        err = capsys.readouterr().err
        assert f"chroma retired since {SINCE}" in err and "candlefire unretire chroma" in err
    assert candlefire(["retire", "qdrant", "--reason", "x"]) == 2
    assert "leaving it out of CANDLEFIRE_STORES" in capsys.readouterr().err


def test_the_reader_never_falls_back_on_a_retired_chroma(retired, monkeypatch):
    embedder = load_embedder(retired.model_id)
    with ServingReader(retired, embedder) as reader:
        reader.retriever()
        assert reader.backend_name == "pgvector"
    assert shadow_targets(retired, "pgvector") == []  # Chroma is not offered, nor Qdrant local
    forced = replace(retired, serving_override="chroma")
    with (
        ServingReader(forced, embedder) as reader,
        pytest.raises(
            ServingRefusedError,
            match='retired since .* `candlefire unretire chroma --reason "..."`',
        ),
    ):
        reader.retriever()
    # a broken switch that still records the retirement: pgvector, not the retired store
    retired.serving_file.write_text(RETIRED.to_json().replace('"state": "pgvector"',
                                                              '"state": "nonsense"'))  # fmt: skip
    with ServingReader(retired, embedder) as reader:
        reader.retriever()
        assert reader.backend_name == "pgvector"
