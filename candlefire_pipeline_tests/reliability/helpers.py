"""Shared pieces of the fault and security tests: versioned rows, lock waits, secret scans."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
from psycopg.conninfo import make_conninfo

from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

#: A bound on waiting for a server-side state; never a performance assertion.
WAIT_LIMIT_S = 120.0
CHROMA = Path(sys.executable).with_name("chroma")


def paper_rows(
    pmids: Iterable[str], version: str, sections: int = 1, dim: int = 16, model_id: str = "test"
) -> pa.Table:
    """Rows of `sections` chunks per paper whose hashes name `version` (v1, v2, ...)."""
    chunks = []
    for pmid in pmids:
        for index in range(sections):
            record = chunk(
                pmid,
                index,
                document=f"{version} text {index} of paper {pmid}",
                has_full_text=sections > 1,
                content_hash=f"{version}-{pmid}-{index}",
                paper_hash=f"{version}-{pmid}",
            )
            chunks.append(record)
    seed = sum(map(ord, version))
    return make_rows(chunks, unit_vectors(len(chunks), dim, seed), model_id=model_id, dim=dim)


def expected_hashes(rows: pa.Table) -> dict[str, str]:
    """chunk_id -> content_hash a store holds after replace_papers(rows) on its pmids."""
    return dict(zip(rows["chunk_id"].to_pylist(), rows["content_hash"].to_pylist(), strict=True))


def wait_for(condition: Callable[[], bool], what: str, alive: Callable[[], bool]) -> None:
    """Poll until condition() holds; fail at once when `alive()` turns false, or after a bound."""
    deadline = time.monotonic() + WAIT_LIMIT_S
    while time.monotonic() < deadline:
        if condition():
            return
        if not alive():
            raise AssertionError(f"the writer finished before {what}")
        time.sleep(0.05)
    raise AssertionError(f"{what}: not reached within {WAIT_LIMIT_S:.0f}s")


def files_containing(root: Path, needle: str) -> list[str]:
    """Every file under root whose bytes hold needle (sqlite, parquet, logs, json ...)."""
    raw = needle.encode()
    return [str(p) for p in sorted(root.rglob("*")) if p.is_file() and raw in p.read_bytes()]


def with_password(dsn: str, password: str, **changes: str) -> str:
    """dsn with a password (and other libpq options) set; trust auth still lets it in."""
    return make_conninfo(dsn, password=password, **changes)


class ChromaServer:
    """`chroma run` on a fixed path and port; kill() and start() again like a crash + restart."""

    def __init__(self, path: Path, log_path: Path) -> None:
        self.path, self.log_path = path, log_path
        self.host, self.port = "127.0.0.1", procs.free_port()
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        cmd = [CHROMA, "run", "--path", self.path, "--host", self.host, "--port", str(self.port)]
        self.proc = procs.spawn(cmd, log_path=self.log_path)
        url = f"http://{self.host}:{self.port}/api/v2/heartbeat"
        procs.wait_until(procs.http_ok(url), proc=self.proc, log_path=self.log_path, what="chroma")

    def kill(self) -> None:
        """SIGKILL: no shutdown path runs, as in a crash or an OOM kill."""
        if self.proc is not None:
            procs.stop_group(self.proc, first=signal.SIGKILL)
            self.proc = None
