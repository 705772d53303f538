"""The pipe between the served process and the shadow worker process: length-prefixed pickles.

The worker is started as `python -m candlefire_pipeline.operations.shadow.worker` (not through
multiprocessing, whose spawn would re-import the app's main module in the child). The parent
sends the Settings once, then one job at a time; the worker answers each job with the number of
comparisons it recorded. Closing the worker's stdin stops it after its current job.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
from pathlib import Path

_HEADER = struct.Struct(">I")
#: Seconds the worker may take to start (imports, the query model; a first ONNX export ~30 s).
STARTUP_TIMEOUT_S = 300.0
WORKER_MODULE = "candlefire_pipeline.operations.shadow.worker"


def write_frame(fd: int, value) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exactly(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("the other end of the shadow pipe closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, timeout: float | None = None):
    """The next value; EOFError when the pipe closed, TimeoutError when nothing came in time."""
    if timeout is not None and not select.select([fd], [], [], timeout)[0]:
        raise TimeoutError(f"nothing on the shadow pipe for {timeout:g} s")
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return pickle.loads(_read_exactly(fd, size))  # our own child, our own pipe


class WorkerLink:
    """One running worker process and its two pipe ends."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process

    @classmethod
    def start(cls, settings) -> WorkerLink:
        env = dict(os.environ)
        # the folder holding this package (candlefire_pipeline/operations/shadow/link.py)
        package_root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen(
            [sys.executable, "-m", WORKER_MODULE], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env,
        )  # fmt: skip
        link = cls(process)
        try:
            write_frame(process.stdin.fileno(), settings)
            ready = read_frame(process.stdout.fileno(), STARTUP_TIMEOUT_S)
        except (OSError, EOFError, TimeoutError):
            link.close(timeout=0.0)
            raise
        link.priority = ready.get("priority")
        return link

    def alive(self) -> bool:
        return self.process.poll() is None

    def replay(self, job) -> int:
        """Send one job and wait for the worker to finish it; how many records it wrote."""
        write_frame(self.process.stdin.fileno(), job)
        return int(read_frame(self.process.stdout.fileno()))

    def close(self, timeout: float) -> None:
        """Close its stdin (it finishes its job, then exits); kill it after `timeout` s."""
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
