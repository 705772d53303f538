"""fsutil: the one file lock every read-modify-write across processes takes."""

import multiprocessing
import threading
import time

from candlefire_pipeline.fsutil import file_lock
from candlefire_pipeline_tests.locks import wait_until_blocked


def _hold(lock_path, log_path, release_path) -> None:
    with file_lock(lock_path):
        with log_path.open("a") as log:
            log.write("child in\n")
        while not release_path.exists():
            time.sleep(0.01)
        with log_path.open("a") as log:
            log.write("child out\n")


def test_a_second_process_waits_until_the_holder_releases(tmp_path):
    lock, log, release = tmp_path / "sub" / "x.lock", tmp_path / "log", tmp_path / "release"
    child = multiprocessing.get_context("fork").Process(target=_hold, args=(lock, log, release))
    child.start()
    while not log.exists():  # the child holds the lock
        assert child.is_alive()
        time.sleep(0.01)

    def take() -> None:
        with file_lock(lock), log.open("a") as out:
            out.write("parent in\n")

    waiter = threading.Thread(target=take)
    waiter.start()
    # the waiter is queued on the lock (not merely started): without the lock it would have
    # written and finished instead, and wait_until_blocked fails at once
    wait_until_blocked(lock, waiter.is_alive)
    release.touch()
    waiter.join()
    child.join()
    assert child.exitcode == 0
    assert log.read_text().splitlines() == ["child in", "child out", "parent in"]


def test_the_lock_is_released_when_the_block_raises(tmp_path):
    lock = tmp_path / "y.lock"
    try:
        with file_lock(lock):
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    with file_lock(lock):  # not held any more: a re-entry in the same process would block
        assert lock.exists()


def _dead_pid() -> int:
    child = multiprocessing.get_context("fork").Process(target=lambda: None)
    child.start()
    child.join()
    return child.pid


def test_only_a_dead_processs_temporaries_are_removed(tmp_path):
    from candlefire_pipeline.fsutil import is_hidden, remove_dead_temporaries, temporary_for

    target = tmp_path / "adopted-0001"
    dead = tmp_path / f".adopted-0001.tmp-{_dead_pid()}"
    live = tmp_path / ".adopted-0001.tmp-1"  # init: alive (another user's, or ours)
    mine, other = temporary_for(target), tmp_path / f".adopted-0002.tmp-{_dead_pid()}"
    for folder in (dead, live, mine, other, target):
        folder.mkdir()
    assert remove_dead_temporaries(target) == [dead]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in (live, mine, other, target)
    )
    assert is_hidden(mine) and not is_hidden(target)
