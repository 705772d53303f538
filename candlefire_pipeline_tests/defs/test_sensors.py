import dagster as dg
import pytest

from candlefire_pipeline.corpus.drop_scan import DropCursor
from candlefire_pipeline.defs.partitions import ingest_batches
from candlefire_pipeline.defs.sensors import pubmed_drops_sensor


@pytest.fixture
def drops(tmp_path, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path))
    drops = tmp_path / "drops"
    drops.mkdir()
    return drops


def _tick(instance, cursor=None) -> dg.SensorResult:
    context = dg.build_sensor_context(instance=instance, cursor=cursor)
    return pubmed_drops_sensor(context)


def test_new_drop_becomes_a_partition_and_a_run_on_the_second_tick(drops):
    (drops / "0001-a.jsonl").write_text('{"pmid": "1"}\n')
    (drops / "0002-b.xml.part").write_text("<PubmedArticleSet>")
    with dg.instance_for_test() as instance:
        first = _tick(instance)
        assert not first.run_requests and first.skip_reason
        second = _tick(instance, first.cursor)
        assert [r.partition_key for r in second.run_requests] == ["0001-a.jsonl"]
        assert second.dynamic_partitions_requests[0].partition_keys == ["0001-a.jsonl"]
        assert second.run_requests[0].run_key.startswith("0001-a.jsonl:")
        third = _tick(instance, second.cursor)
        assert not third.run_requests


def test_replaced_drop_is_requested_again_without_re_adding_the_partition(drops):
    path = drops / "0001-a.jsonl"
    path.write_text('{"pmid": "1"}\n')
    with dg.instance_for_test() as instance:
        cursor = _tick(instance, _tick(instance).cursor).cursor
        instance.add_dynamic_partitions(ingest_batches.name, ["0001-a.jsonl"])
        path.write_text('{"pmid": "1"}\n{"pmid": "2"}\n')
        result = _tick(instance, _tick(instance, cursor).cursor)
        assert [r.partition_key for r in result.run_requests] == ["0001-a.jsonl"]
        assert not result.dynamic_partitions_requests
        assert (
            result.run_requests[0].run_key == DropCursor.parse(result.cursor).seen["0001-a.jsonl"]
        )


def test_drop_with_an_unusable_name_is_ignored(drops):
    (drops / "two..dots.jsonl").write_text("{}\n")
    (drops / "tab\there.jsonl").write_text("{}\n")
    with dg.instance_for_test() as instance:
        result = _tick(instance, _tick(instance).cursor)
        assert not result.run_requests
