"""Servers for the scale-out tests: standalone Postgres servers and a Chroma server."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline_tests import procs

CHROMA = Path(sys.executable).with_name("chroma")


@contextmanager
def standalone_postgres(label: str) -> Iterator[EmbeddedPostgres]:
    """A Postgres server of its own (in a procs.scratch_dir), stopped and deleted at exit."""
    with procs.scratch_dir(label) as root:
        server = EmbeddedPostgres(root / "data")
        try:
            server.dsn  # noqa: B018 - start it now so a start failure surfaces here
            yield server
        finally:
            server.stop()
            assert not server.is_running()


@contextmanager
def chroma_server(path: Path, log_path: Path, port: int | None = None) -> Iterator[int]:
    """`chroma run` on 127.0.0.1 (a free port unless given); yields the port, stops it by pid."""
    port = port or procs.free_port()
    proc = procs.spawn(
        [CHROMA, "run", "--path", path, "--host", "127.0.0.1", "--port", str(port)],
        log_path=log_path,
    )
    try:
        procs.wait_until(
            procs.http_ok(f"http://127.0.0.1:{port}/api/v2/heartbeat"),
            proc=proc,
            log_path=log_path,
            what="chroma run",
        )
        yield port
    finally:
        procs.stop_group(proc)


@pytest.fixture
def start_chroma(tmp_path: Path) -> Callable[..., object]:
    """chroma_server bound to this test's tmp dir: start_chroma(path, port=None)."""

    def start(path: Path, port: int | None = None):
        return chroma_server(path, tmp_path / f"chroma-{port or 'new'}.log", port)

    return start
