"""`candlefire backup prune`: the newest backups and the WAL they need kept, the rest removed;
a dry run by default, a prune killed midway finished by the next, and a restore from what is
left on a real server."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.operations.backup.archive import segment_number
from candlefire_pipeline.operations.backup.manifest import BackupManifest, backups, write_manifest
from candlefire_pipeline.operations.backup.prune import SET_ASIDE, plan, prune
from candlefire_pipeline.operations.backup.tools import BackupError
from candlefire_pipeline_tests.operations.backup.steps import (
    backed_up,
    command,
    held,
    ingest,
    lose_data_dir,
)
from candlefire_pipeline_tests.operations.batches import paper

#: backups by label -> the segment each starts in (timeline 1, then 2 after a restore)
STARTS = {"20260101T000000Z": "000000010000000000000003",
          "20260102T000000Z": "000000010000000000000007",
          "20260103T000000Z": "00000002000000000000000B"}  # fmt: skip
WAL = ["000000010000000000000002", "000000010000000000000003", "000000010000000000000006",
       "000000010000000000000006.00000028.backup", "000000010000000000000007",
       "000000010000000000000009.partial", "00000002000000000000000A", "00000002.history",
       "00000002000000000000000B", "00000002000000000000000C",
       "000000010000000000000001.part", "notes.txt"]  # fmt: skip


def folder_with_backups(root, starts=STARTS, wal=WAL):
    for label, segment in starts.items():
        manifest = BackupManifest(label, "t0", label, 1, "0/1", "0/2", segment, 10, 1.0)
        write_manifest(root, manifest)
        (root / "base" / label / "base.tar").write_bytes(b"x" * 100)
    (root / "wal").mkdir(parents=True, exist_ok=True)
    for name in wal:
        (root / "wal" / name).write_bytes(b"w" * 16)
    return root


def remaining_wal(root) -> list[str]:
    return sorted(p.name for p in (root / "wal").iterdir())


@pytest.mark.parametrize(
    ("keep", "removed_bases", "removed_wal"),
    [
        (1, 2, ["000000010000000000000002", "000000010000000000000003",
                "000000010000000000000006", "000000010000000000000006.00000028.backup",
                "000000010000000000000007", "000000010000000000000009.partial",
                "00000002000000000000000A"]),
        (2, 1, ["000000010000000000000002", "000000010000000000000003",
                "000000010000000000000006", "000000010000000000000006.00000028.backup"]),
        (3, 0, ["000000010000000000000002"]),
        (9, 0, ["000000010000000000000002"]),
    ],
)  # fmt: skip
def test_prune_keeps_the_newest_backups_and_the_wal_from_the_oldest_kept_start(
    tmp_path, keep, removed_bases, removed_wal
):
    root = folder_with_backups(tmp_path)
    dry = plan(root, keep)
    assert (len(dry.bases), sorted(p.name for p in dry.segments)) == (removed_bases, removed_wal)
    base_bytes = sum(f.stat().st_size for m in dry.bases
                     for f in (root / "base" / m.label).iterdir())  # fmt: skip
    assert dry.bytes == base_bytes + 16 * len(removed_wal) and base_bytes >= 100 * removed_bases
    assert "--apply" in dry.lines(applied=False)[-1] or not (dry.bases or dry.segments)
    assert remaining_wal(root) == sorted(WAL)  # a dry run touches nothing
    done = prune(root, keep, apply=True)
    assert [m.label for m in backups(root)] == [m.label for m in done.kept]
    assert remaining_wal(root) == sorted(set(WAL) - set(removed_wal))
    # history files, in-flight copies and foreign files always stay
    assert {"00000002.history", "000000010000000000000001.part", "notes.txt"} <= set(
        remaining_wal(root)
    )
    again = plan(root, keep)
    assert (again.bases, again.segments, again.bytes) == ([], [], 0)


def test_a_prune_killed_after_setting_a_base_aside_is_finished_by_the_next(tmp_path):
    root = folder_with_backups(tmp_path)
    oldest = root / "base" / "20260101T000000Z"
    oldest.rename(root / "base" / f"{SET_ASIDE}20260101T000000Z")  # killed right after this
    assert [m.label for m in backups(root)] == ["20260102T000000Z", "20260103T000000Z"]
    (root / "base" / "20260104T000000Z").mkdir()  # a take still running: no manifest yet
    result = prune(root, 1, apply=True)
    assert [m.label for m in result.bases] == ["20260102T000000Z"]
    assert sorted(p.name for p in (root / "base").iterdir()) == [
        "20260103T000000Z", "20260104T000000Z"
    ]  # fmt: skip
    assert "20260104T000000Z" in result.lines(applied=True)[-1]


@pytest.mark.parametrize(
    ("keep", "starts", "error"),
    [(0, STARTS, "at least one backup must stay"), (1, {}, "nothing to prune")],
)
def test_prune_refuses_to_keep_nothing_and_to_prune_without_a_backup(tmp_path, keep, starts, error):
    root = folder_with_backups(tmp_path, starts)
    with pytest.raises(BackupError, match=error):
        prune(root, keep, apply=True)
    assert remaining_wal(root) == sorted(WAL)


@pytest.mark.server
def test_a_restore_from_what_a_prune_kept_brings_everything_back(deployment, capsys):
    settings = deployment
    folder = settings.data_dir / "backups"
    ingest(settings, "b1", [paper("1"), paper("2", sections=2)])
    backed_up(settings, capsys)
    ingest(settings, "b2", [paper("2", "v2"), paper("3")])
    code, out, err = command(capsys, "backup", "take")
    assert code == 0, err
    ingest(settings, "b3", [paper("4", sections=1)])
    code, out, err = command(capsys, "backup", "prune", "--keep", "1")
    assert code == 0 and "would remove 1 backup(s)" in out and "--apply" in out, err
    assert len(backups(folder)) == 2
    code, out, err = command(capsys, "backup", "prune", "--keep", "1", "--apply")
    assert code == 0 and "removed 1 backup(s)" in out, err
    [kept] = backups(folder)
    assert " and 0 WAL file(s)" not in out
    start = segment_number(kept.start_segment)
    assert all(segment_number(p.name[:24]) >= start for p in (folder / "wal").iterdir()
               if not p.name.endswith(".history"))  # fmt: skip
    lose_data_dir(settings)
    code, out, err = command(capsys, "restore")
    assert code == 0, err
    assert held(settings) == expected_chunks(settings.batches_dir)
    EmbeddedPostgres(settings.pg_data_dir).stop()
