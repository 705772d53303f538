"""Overlapping drops applied in order (and an old one again) equal a from-scratch build."""

import json

import dagster as dg
import pyarrow.parquet as pq

from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.corpus.schema import PAPER_SCHEMA
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import STORE_NAMES
from candlefire_pipeline_tests.defs.pipeline_harness import Pipeline, metadata, pipeline_env

PAPER_FIELDS = [f.name for f in PAPER_SCHEMA if f.name not in ("record_no", "paper_hash")]


def _store_hashes(settings: Settings) -> dict[str, dict[str, str]]:
    out = {}
    for name in STORE_NAMES:
        backend = open_backend(name, settings)
        try:
            out[name] = backend.chunk_hashes()
        finally:
            backend.close()
    return out


def _latest_versions_drop(settings: Settings, keys: list[str]) -> str:
    """One jsonl holding the latest accepted version of every paper not deleted afterwards."""
    latest: dict[str, dict] = {}
    for key in keys:  # batch order = file-name order
        batch = settings.batch_dir(key)
        for pmid in pq.read_table(batch / "deleted.parquet")["pmid"].to_pylist():
            latest.pop(pmid, None)
        for paper in pq.read_table(batch / "papers.parquet").to_pylist():
            latest[paper["pmid"]] = {k: paper[k] for k in PAPER_FIELDS}
    return "\n".join(json.dumps(p) for p in latest.values()) + "\n"


def test_updates_upgrades_deletes_and_an_old_rerun_converge(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "incremental", pg_dsn)
    keys = [p.name for p in write_demo_drops(settings.drops_dir)]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        pipeline = Pipeline(instance)
        for key in keys:
            assert pipeline.ingest(key).success
        stale = pipeline.ingest(keys[0])  # an OLDER batch materialized again, last
        assert stale.success
        assert metadata(stale, "embeddings")["embedded"] == 0  # all from the cache
        rerun = metadata(stale, "pgvector_chunks")
        assert rerun["papers_superseded"] > 0
        incremental = _store_hashes(settings)
        drop = _latest_versions_drop(settings, keys)

    scratch = pipeline_env(monkeypatch, tmp_path / "scratch", pg_dsn)
    (scratch.drops_dir / "0001-latest.jsonl").write_text(drop)
    with dg.instance_for_test(temp_dir=str(tmp_path / "scratch")) as instance:
        assert Pipeline(instance).ingest("0001-latest.jsonl").success
        expected = _store_hashes(scratch)

    for name in STORE_NAMES:
        assert incremental[name] == expected[name] == expected["pgvector"], name


def test_demo_drops_exercise_update_upgrade_and_delete(tmp_path):
    """Guards the fixture above: the demo drops really contain all three kinds of change."""
    from candlefire_pipeline.corpus.drops import write_chunks, write_papers

    drops = write_demo_drops(tmp_path / "drops")
    batches = []
    for drop in drops:
        out = tmp_path / "b" / drop.name
        summary = write_papers(drop, out)
        write_chunks(out)
        batches.append((summary, pq.read_table(out / "chunks.parquet").to_pylist()))
    first_ids = {c["chunk_id"] for c in batches[0][1]}
    later = [c for _, rows in batches[1:] for c in rows]
    upgraded = {c["pmid"] for c in later if c["chunk_id"].endswith("_s0")} & first_ids
    assert upgraded, "an abstract-only paper (bare-pmid chunk) must gain full text later"
    updated = {c["pmid"] for c in later} & {c["pmid"] for c in batches[0][1]}
    assert len(updated) > len(upgraded)
    assert sum(s.deleted for s, _ in batches) >= 1


def test_a_drop_named_before_an_applied_one_says_which_papers_it_holds_back(
    tmp_path, monkeypatch, pg_dsn, capsys
):
    """`after-backup.jsonl` arrives after `v2.jsonl` but sorts before it: register-drops warns,
    and the store's log line and metadata count the paper v2 holds back and name v2."""
    from candlefire_pipeline.cli import main as candlefire

    settings = pipeline_env(monkeypatch, tmp_path / "order", pg_dsn)
    paper = {"title": "t", "abstract": "a", "authors": [], "mesh_terms": []}
    settings.drops_dir.mkdir(parents=True, exist_ok=True)
    (settings.drops_dir / "v2.jsonl").write_text(json.dumps({**paper, "pmid": "1"}) + "\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        assert Pipeline(instance).ingest("v2.jsonl").success
        later = [json.dumps({**paper, "pmid": "1", "abstract": "newer"}),
                 json.dumps({**paper, "pmid": "2"})]  # fmt: skip
        (settings.drops_dir / "after-backup.jsonl").write_text("\n".join(later) + "\n")
        assert candlefire(["register-drops"]) == 0
        warned = capsys.readouterr().err
        assert "after-backup.jsonl sorts before v2.jsonl, already applied" in warned
        result = Pipeline(instance).ingest("after-backup.jsonl")
        lines = [entry.user_message for entry in instance.all_logs(result.run_id)]
    stored = metadata(result, "pgvector_chunks")
    assert stored["papers_superseded"] == 1 and stored["superseded_by"] == "v2.jsonl (1)"
    assert stored["papers_replaced"] == 1  # pmid 2
    assert any("1 papers held back by later-named drops already applied (v2.jsonl (1))" in line
               for line in lines), lines  # fmt: skip
