import os
import time

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


# -- the shared drop record: what the CLI or any run took in is not launched again -------------


@pytest.fixture
def cli_instance(drops, tmp_path, monkeypatch):
    """DAGSTER_HOME for both the CLI (DagsterInstance.get) and the sensor's context."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        yield instance


def _two_ticks(instance, cursor=None) -> dg.SensorResult:
    """The first tick of a fresh sensor only sees files; the second could launch them."""
    return _tick(instance, _tick(instance, cursor).cursor)


def test_drops_registered_by_the_cli_are_not_launched_but_a_changed_one_is(drops, cli_instance):
    from candlefire_pipeline.cli import main as candlefire

    for name in ("0001-a.jsonl", "0002-b.jsonl"):
        (drops / name).write_text('{"pmid": "1", "title": "t", "abstract": "a"}\n')
    assert candlefire(["register-drops"]) == 0
    result = _two_ticks(cli_instance)
    assert result.run_requests == [] and not result.dynamic_partitions_requests
    assert "2 already taken in" in result.skip_reason.skip_message
    changed = drops / "0002-b.jsonl"
    changed.write_text('{"pmid": "2", "title": "t", "abstract": "changed"}\n')
    os.utime(changed, ns=(time.time_ns() + 10**9,) * 2)
    result = _two_ticks(cli_instance, result.cursor)
    assert [r.partition_key for r in result.run_requests] == ["0002-b.jsonl"]


def test_a_drop_materialized_by_any_run_is_not_launched_again(drops, cli_instance):
    from candlefire_pipeline.defs.ingest_assets import papers
    from candlefire_pipeline.defs.resources import build_resources
    from candlefire_pipeline.settings import Settings

    for name in ("0001-a.jsonl", "0002-b.jsonl"):
        (drops / name).write_text('{"pmid": "1", "title": "t", "abstract": "a"}\n')
    cli_instance.add_dynamic_partitions(ingest_batches.name, ["0001-a.jsonl"])
    result = dg.materialize(
        [papers],
        instance=cli_instance,
        partition_key="0001-a.jsonl",
        resources=build_resources(Settings.from_env()),
    )
    assert result.success
    result = _two_ticks(cli_instance)
    assert [r.partition_key for r in result.run_requests] == ["0002-b.jsonl"]
    assert result.dynamic_partitions_requests[0].partition_keys == ["0002-b.jsonl"]


def test_a_corrupt_record_makes_every_drop_new_again_with_a_warning(drops, cli_instance):
    (drops / "0001-a.jsonl").write_text("{}\n")
    (drops.parent / "ingested_drops.json").write_text("{ not json")
    result = _two_ticks(cli_instance)
    assert [r.partition_key for r in result.run_requests] == ["0001-a.jsonl"]


def test_vacuous_case_no_drops_folder_no_record(tmp_path, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "nothing"))
    with dg.instance_for_test() as instance:
        result = _two_ticks(instance)
    assert result.run_requests == [] and "no new complete drops" in result.skip_reason.skip_message
