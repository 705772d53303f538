"""Steps the backup tests share: the operator's commands, a drop ingested into pgvector, what
the store holds."""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.cli import main as candlefire
from candlefire_pipeline.operations.backup.recover import staging_dir
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.fixtures_backends import pg_data_root
from candlefire_pipeline_tests.operations.batches import EMBEDDER, apply, write_batch


@contextmanager
def own_deployment(monkeypatch) -> Iterator[Settings]:
    """Settings on a data dir of the test's own, its embedded server under data/pg (stopped at
    the end, with any staging server a failed restore left)."""
    with pg_data_root() as root:
        monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(root / "data"))
        monkeypatch.delenv("CANDLEFIRE_PG_DSN", raising=False)
        settings = Settings.from_env()
        try:
            yield settings
        finally:
            EmbeddedPostgres(settings.pg_data_dir).stop()
            EmbeddedPostgres(staging_dir(settings.pg_data_dir)).stop()


def command(capsys, *args: str) -> tuple[int, str, str]:
    code = candlefire(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def ingest(settings: Settings, key: str, records: list[dict], deletes=None) -> None:
    """One drop through the real stages, applied to pgvector (its ledger marker written)."""
    write_batch(settings.batches_dir, key, records, deletes)
    with opened_backend("pgvector", settings) as store:
        apply(store, settings.batches_dir, key)
        # term cache entries (kept, so the restore has them to check)
        store.substring_candidates(["SOD1"], EMBEDDER.embed(["SOD1"]), 5)


def held(settings: Settings) -> dict[str, str]:
    with opened_backend("pgvector", settings) as store:
        return store.chunk_hashes()


def backed_up(settings: Settings, capsys) -> str:
    assert command(capsys, "backup", "enable")[0] == 0
    code, out, err = command(capsys, "backup", "take")
    assert code == 0, err
    return out


def lose_data_dir(settings: Settings) -> None:
    """The disk under data/pg dies: every server process SIGKILLed at once (no shutdown path
    runs, so the WAL segment being written never reaches the archive), then the folder gone."""
    server = EmbeddedPostgres(settings.pg_data_dir)
    server.dsn  # noqa: B018 - the handle of the running server, for its pid
    postmaster = psutil.Process(server.pid)
    processes = [postmaster, *postmaster.children(recursive=True)]
    for process in processes:
        process.send_signal(signal.SIGKILL)
    psutil.wait_procs(processes, timeout=30)
    server.stop()  # forgets the handle
    shutil.rmtree(settings.pg_data_dir)
