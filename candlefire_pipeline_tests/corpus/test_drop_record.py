"""The shared drop record: which drop versions were taken in, by whom."""

import json
import multiprocessing
import os

import pytest

from candlefire_pipeline.corpus.drop_record import (
    DropRecordError,
    drop_file,
    read_record,
    record_drops,
)
from candlefire_pipeline.corpus.drop_scan import DropFile


def test_a_missing_record_is_empty(tmp_path):
    assert read_record(tmp_path / "ingested_drops.json") == {}


def test_recorded_versions_read_back_and_a_new_version_replaces_the_old(tmp_path):
    path = tmp_path / "ingested_drops.json"
    assert record_drops(path, [DropFile("a.jsonl", 10, 1), DropFile("b.xml", 20, 2)], "cli") == 2
    assert record_drops(path, [DropFile("a.jsonl", 10, 1)], "run r1") == 0  # same version
    assert record_drops(path, [DropFile("a.jsonl", 11, 5)], "run r2") == 1  # the file changed
    assert read_record(path) == {"a.jsonl": "a.jsonl:11:5", "b.xml": "b.xml:20:2"}
    entries = json.loads(path.read_text())["drops"]
    assert entries["a.jsonl"]["by"] == "run r2" and entries["b.xml"]["by"] == "cli"


def test_recording_nothing_writes_nothing(tmp_path):
    assert record_drops(tmp_path / "r.json", [], "cli") == 0
    assert not (tmp_path / "r.json").exists()


def test_the_fingerprint_changes_when_the_file_does(tmp_path):
    drop = tmp_path / "0001-a.jsonl"
    drop.write_text("{}\n")
    before = drop_file(drop)
    drop.write_text('{"pmid": "1"}\n')
    os.utime(drop, ns=(before.mtime_ns + 10**9, before.mtime_ns + 10**9))
    after = drop_file(drop)
    assert before.name == after.name and before.run_key != after.run_key


@pytest.mark.parametrize("content", ["not json", "[]", '{"drops": {"a": 3}}', '{"x": 1}'])
def test_an_unreadable_record_is_a_clear_error_and_the_next_write_rebuilds_it(tmp_path, content):
    path = tmp_path / "ingested_drops.json"
    path.write_text(content)
    with pytest.raises(DropRecordError, match="is not a drop record"):
        read_record(path)
    record_drops(path, [DropFile("a.jsonl", 1, 1)], "cli")
    assert read_record(path) == {"a.jsonl": "a.jsonl:1:1"}


def _record_many(path: str, prefix: str) -> None:
    for i in range(40):
        record_drops(path, [DropFile(f"{prefix}{i:02d}.jsonl", i, i)], prefix)


def test_concurrent_writers_lose_no_entry(tmp_path):
    path = str(tmp_path / "ingested_drops.json")
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_record_many, args=(path, p)) for p in ("x", "y", "z")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    assert len(read_record(path)) == 120
