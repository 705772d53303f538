"""A real local Ray cluster for tests: `ray start --head --block` on 127.0.0.1, stopped by pid."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from candlefire_pipeline_tests import procs

RAY = Path(sys.executable).with_name("ray")
#: Without it Ray replaces 127.0.0.1 by the machine's interface address (for a multi-node
#: cluster), and a driver on loopback then waits forever for a node it cannot match.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: The object store only carries slices of texts and vectors here.
OBJECT_STORE_BYTES = 200 * 2**20


@dataclass(frozen=True)
class RayCluster:
    address: str
    root: Path
    log_path: Path


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            return True
    except OSError:
        return False


def _started(log_path: Path, port: int):
    def probe() -> bool:
        return "Ray runtime started" in procs.log_tail(log_path, 200) and _accepts(port)

    return probe


@contextmanager
def local_ray_cluster(num_cpus: int = 2) -> Iterator[RayCluster]:
    """A head node with `num_cpus` CPUs; every process it started is gone at exit."""
    # short root: Ray's Unix socket paths must stay under 107 characters
    with procs.scratch_dir("ray") as root:
        port = procs.free_port()
        log_path = root / "ray.log"
        command = [
            RAY, "start", "--head", "--block",
            "--node-ip-address=127.0.0.1", f"--port={port}",
            f"--ray-client-server-port={procs.free_port()}",
            f"--num-cpus={num_cpus}", f"--object-store-memory={OBJECT_STORE_BYTES}",
            "--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={root / 'ray'}",
        ]  # fmt: skip
        proc = procs.spawn(command, log_path=log_path, env={**os.environ, **LOOPBACK_ENV})
        try:
            procs.wait_until(_started(log_path, port), proc=proc, log_path=log_path, what="ray")
            yield RayCluster(address=f"127.0.0.1:{port}", root=root, log_path=log_path)
        finally:
            procs.stop_group(proc)
            # raylet-spawned workers re-parent when their raylet dies first; find them by path
            procs.stop_pids(procs.pids_with_arg(str(root)))
