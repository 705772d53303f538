"""Fault: the disk under Postgres fills in the middle of a drop. The data directory sits on a
small tmpfs made by the test, its WAL on another disk or on the same one. The drop fails with
one clear error, nothing of it is committed, and the next run converges once space is back."""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from candlefire_pipeline.backends.common import StoreFullError
from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.operations.indexing import apply_batch
from candlefire_pipeline_tests.backends.pg.terms.corpus import Corpus
from candlefire_pipeline_tests.fixtures_backends import pg_data_root
from candlefire_pipeline_tests.reliability.drill.workload import Workload
from candlefire_pipeline_tests.reliability.helpers import wait_for

pytestmark = pytest.mark.server

DISK_MB = 200
#: Space left free when the disk is filled: far less than the drop needs.
LEFT_FREE = 256 * 1024
#: WAL left in the current segment when the drop starts (the WAL-on-the-full-disk layout).
WAL_LEFT = 16 * 1024
WAL_ELSEWHERE, WAL_ON_THE_FULL_DISK = "wal_elsewhere", "wal_on_the_full_disk"


@contextmanager
def small_disk(path: Path) -> Iterator[Path]:
    """A tmpfs of DISK_MB mounted at path, unmounted afterwards (the test runs as root)."""
    path.mkdir(parents=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={DISK_MB}m,mode=0755", "tmpfs", str(path)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:  # conftest turns this skip into a failure when CI=true
        pytest.skip(f"cannot mount a tmpfs at {path}: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def fill(disk: Path) -> Path:
    """A file taking every byte of the disk but LEFT_FREE."""
    stat = os.statvfs(disk)
    filler = disk / "filler"
    with filler.open("wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, stat.f_bavail * stat.f_frsize - LEFT_FREE)
    return filler


def move_wal(server: EmbeddedPostgres, target: Path) -> None:
    """pg_wal onto another disk, behind a symlink (what `initdb --waldir` makes)."""
    server.stop()
    wal = server.data_dir / "pg_wal"
    subprocess.run(["mv", str(wal), str(target)], check=True)  # as root: owner kept
    wal.symlink_to(target)
    server.dsn  # noqa: B018 - start it again


def at_a_wal_segment_end(dsn: str) -> None:
    """The WAL a few KB before its segment's end, with no segment recycled ahead of it: the
    drop's first WAL needs a new segment file on the full disk (the case that PANICs)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET wal_recycle = off")
        conn.execute("SELECT pg_reload_conf()")
        conn.execute("CHECKPOINT")
        segment = int(conn.execute("SELECT setting FROM pg_settings"
                                   " WHERE name = 'wal_segment_size'").fetchone()[0])  # fmt: skip
        offset = conn.execute(
            "SELECT file_offset FROM pg_walfile_name_offset(pg_current_wal_insert_lsn())"
        ).fetchone()[0]
        filler = segment - offset - WAL_LEFT
        conn.execute("SELECT pg_logical_emit_message(false, 'drill', repeat('x', %s))", [filler])


def _answers(server: EmbeddedPostgres) -> bool:
    """A connection to the running server succeeds: it is out of crash recovery."""
    dsn = server.running_dsn()
    if dsn is None:
        return False
    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.Error:
        return False
    return True


def back_up(server: EmbeddedPostgres) -> None:
    """After a PANIC the server recovers on its own once space is back, or it gave up and
    exited: then it is started again (crash recovery) by the next `dsn`."""
    wait_for(lambda: _answers(server) or not server.is_running(), "crash recovery", lambda: True)
    if not server.is_running():
        server.stop()  # forget the dead server's handle


def workload(batches: Path) -> Workload:
    corpus = Corpus(random.Random(44))
    return Workload(corpus.rows(corpus.add(2_000)), batches, seed=44)


def apply(dsn: str, load: Workload, key: str) -> None:
    store = build_backend("pgvector", dsn, table="full_chunks")
    try:
        apply_batch(store, load.batches_dir, key, load.model_id, load.dim)
    finally:
        store.close()


def held(dsn: str) -> dict[str, str]:
    store = build_backend("pgvector", dsn, table="full_chunks")
    try:
        return store.chunk_hashes()
    finally:
        store.close()


@pytest.mark.parametrize("layout", [WAL_ELSEWHERE, WAL_ON_THE_FULL_DISK])
def test_a_full_disk_fails_the_drop_whole_and_the_next_run_converges(layout, tmp_path):
    with pg_data_root() as root, small_disk(root / "disk") as disk:
        server = EmbeddedPostgres(disk / "data")
        try:
            server.dsn  # noqa: B018 - start it
            if layout == WAL_ELSEWHERE:
                move_wal(server, root / "wal")
            load = workload(tmp_path / "batches")
            apply(server.dsn, load, load.first_batch())
            before = held(server.dsn)
            drop = load.next_drop(0.5)
            if layout == WAL_ON_THE_FULL_DISK:
                at_a_wal_segment_end(server.dsn)
            filler = fill(disk)

            with pytest.raises((StoreFullError, psycopg.OperationalError)) as raised:
                apply(server.dsn, load, drop)
            error = raised.value
            if layout == WAL_ELSEWHERE:  # a relation could not grow: an ERROR, rolled back
                assert isinstance(error, StoreFullError)
                assert str(error).startswith("the disk of Postgres at postgresql://")
                assert str(server.data_dir) in str(error) and "\n" not in str(error)
                assert "No space left on device" in str(error)
                assert held(server.dsn) == before  # read with the disk still full
            else:
                # the WAL could not grow: Postgres PANICs and the client loses its connection.
                # When a relation's growth fails first (the next segment was pre-allocated), the
                # client gets StoreFullError, and writing the abort may PANIC after it.
                assert isinstance(error, StoreFullError) or "server closed" in str(error)
                log = (server.data_dir / "log").read_text(errors="replace").splitlines()
                print("server log:", *[line for line in log if "PANIC:" in line][:2],
                      sep="\n  ")  # fmt: skip
            print(f"{layout}: {type(error).__name__}: {error}")
            assert drop not in StoreLedger(load.batches_dir, "pgvector").applied()

            filler.unlink()  # space is back
            back_up(server)
            assert held(server.dsn) == before
            apply(server.dsn, load, drop)
            assert held(server.dsn) == expected_chunks(load.batches_dir)
            assert drop in StoreLedger(load.batches_dir, "pgvector").applied()
        finally:
            server.stop()
