"""A local Ray head on 127.0.0.1 for benchmarks, stopped (its whole process group) at exit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def local_ray_head(root: Path, num_cpus: int = 2, limit_s: float = 300) -> Iterator[str]:
    """Start `ray start --head --block`; yield its address; stop its process group."""
    port, log_path = _free_port(), root / "ray.log"
    # without it Ray advertises the interface address instead of 127.0.0.1 (read at import: set
    # before this process first imports ray, too)
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    command = [
        RAY, "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
        f"--ray-client-server-port={_free_port()}", f"--num-cpus={num_cpus}",
        "--object-store-memory=209715200", "--include-dashboard=false",
        "--disable-usage-stats", f"--temp-dir={root / 'ray'}",
    ]  # fmt: skip
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        deadline = time.monotonic() + limit_s
        while "Ray runtime started" not in log_path.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"ray did not start:\n{log_path.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
