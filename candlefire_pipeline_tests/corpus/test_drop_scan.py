import os

import pytest

from candlefire_pipeline.corpus.drop_scan import DropCursor, DropFile, ready_drops, scan_drops


@pytest.mark.parametrize(
    "name, listed",
    [
        ("0001-a.jsonl", True),
        ("pubmed25n1274.xml.gz", True),
        ("b.xml", True),
        ("c.jsonl.part", False),
        ("c.xml.tmp", False),
        (".hidden.jsonl", False),
        ("notes.txt", False),
    ],
)
def test_scan_drops_lists_only_complete_drop_files(tmp_path, name, listed):
    (tmp_path / name).write_text("{}\n")
    assert [d.name for d in scan_drops(tmp_path)] == ([name] if listed else [])


def test_scan_drops_of_a_missing_folder_is_empty(tmp_path):
    assert scan_drops(tmp_path / "nope") == []


def test_a_drop_is_ready_on_the_second_tick_that_sees_it_unchanged():
    drop = DropFile("a.jsonl", 10, 1)
    ready, cursor = ready_drops([drop], DropCursor())
    assert ready == [] and cursor.pending == {"a.jsonl": [10, 1]}
    ready, cursor = ready_drops([drop], cursor)
    assert ready == [drop] and cursor.seen == {"a.jsonl": drop.run_key} and not cursor.pending
    ready, cursor = ready_drops([drop], cursor)
    assert ready == []


def test_a_growing_file_waits_until_it_settles():
    cursor = DropCursor()
    for size in (10, 20, 30):
        ready, cursor = ready_drops([DropFile("a.jsonl", size, size)], cursor)
        assert ready == []
    ready, cursor = ready_drops([DropFile("a.jsonl", 30, 30)], cursor)
    assert [d.size for d in ready] == [30]


def test_a_replaced_file_runs_again_with_a_new_run_key():
    old, new = DropFile("a.jsonl", 10, 1), DropFile("a.jsonl", 12, 2)
    cursor = DropCursor(seen={"a.jsonl": old.run_key})
    _, cursor = ready_drops([new], cursor)
    ready, cursor = ready_drops([new], cursor)
    assert ready == [new] and new.run_key != old.run_key


def test_cursor_round_trips_through_json():
    cursor = DropCursor(seen={"a": "a:1:2"}, pending={"b": [3, 4]})
    assert DropCursor.parse(cursor.dump()) == cursor
    assert DropCursor.parse(None) == DropCursor()


def test_mtime_change_alone_makes_a_new_run_key(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text("{}\n")
    before = scan_drops(tmp_path)[0]
    os.utime(path, ns=(before.mtime_ns + 10**9, before.mtime_ns + 10**9))
    assert scan_drops(tmp_path)[0].run_key != before.run_key


def test_a_drop_taken_in_elsewhere_is_skipped_until_it_changes():
    drop = DropFile("a.jsonl", 10, 1)
    taken_in = {"a.jsonl": drop.run_key}
    ready, cursor = ready_drops([drop], DropCursor(), taken_in)
    ready, cursor = ready_drops([drop], cursor, taken_in)
    assert ready == [] and cursor.pending == {} and cursor.seen == {}
    changed = DropFile("a.jsonl", 12, 2)
    ready, cursor = ready_drops([changed], cursor, taken_in)
    assert ready == [] and cursor.pending == {"a.jsonl": [12, 2]}
    ready, cursor = ready_drops([changed], cursor, taken_in)
    assert ready == [changed]
