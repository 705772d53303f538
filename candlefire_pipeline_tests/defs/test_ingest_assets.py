import json

import dagster as dg
import pyarrow.parquet as pq

from candlefire_pipeline.defs.ingest_assets import chunks, embeddings, papers
from candlefire_pipeline.defs.resources import build_resources
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.defs.pipeline_harness import metadata, pipeline_env

RECORDS = [
    {"pmid": "101", "title": "SPG302 in ALS", "abstract": "SPG302 restores synapses.",
     "mesh_terms": ["ALS"], "full_text": "Lead.\n[Results]\nSPG-302 worked.\n[Methods]\nMice."},
    {"pmid": "102", "title": "TDP-43", "abstract": "TDP-43 aggregates in motor neurons."},
    {"pmid": "", "title": "no pmid"},
]  # fmt: skip


def _materialize(instance, key):
    instance.add_dynamic_partitions("ingest_batches", [key])
    return dg.materialize(
        [papers, chunks, embeddings],
        instance=instance,
        resources=build_resources(Settings.from_env()),
        partition_key=key,
    )


def test_three_ingest_assets_materialize_one_partition(tmp_path, monkeypatch, pg_dsn):
    settings = pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    lines = [json.dumps(r) for r in RECORDS] + ["{not json"]
    (settings.drops_dir / "0001-t.jsonl").write_text("\n".join(lines) + "\n")
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        result = _materialize(instance, "0001-t.jsonl")
        assert result.success
        meta = metadata(result, "papers")
        assert (meta["records_in"], meta["accepted"], meta["rejected"]) == (4, 2, 2)
        assert metadata(result, "chunks")["chunks"] == 4  # 101: Abstract, Results, Methods; 102
        first = metadata(result, "embeddings")
        assert (first["embedded"], first["cached"]) == (4, 0)
        batch = settings.batch_dir("0001-t.jsonl")
        ids = pq.read_table(batch / "chunks.parquet")["chunk_id"].to_pylist()
        assert sorted(ids) == ["101_s0", "101_s1", "101_s2", "102"]
        again = metadata(_materialize(instance, "0001-t.jsonl"), "embeddings")
        assert (again["embedded"], again["cached"]) == (0, 4)


def test_missing_drop_fails_with_a_clear_message(tmp_path, monkeypatch, pg_dsn):
    pipeline_env(monkeypatch, tmp_path / "data", pg_dsn)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("ingest_batches", ["gone.jsonl"])
        result = dg.materialize(
            [papers],
            instance=instance,
            resources=build_resources(Settings.from_env()),
            partition_key="gone.jsonl",
            raise_on_error=False,
        )
        assert not result.success
        failure = result.get_step_failure_events()[0].step_failure_data.error
        assert "gone.jsonl" in failure.message and "drops folder" in failure.message
