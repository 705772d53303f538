"""DelayProxy in a child process, for benchmarks: the app's threads cannot slow its packets.

In the app's own process the proxy's thread needs the GIL for every chunk it forwards, and an
app thread busy in Python holds it for up to the switch interval (5 ms): under load a hop then
waits for the app, so the measured "network" grows with the app's CPU work. Here the proxy runs
in `python -m candlefire_harness.netdelay_process`, driven over its stdin/stdout (pickles);
the API is DelayProxy's. The child exits when its stdin closes (close(), or this process dies).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from pathlib import Path

from candlefire_harness.netdelay import DelayProxy
from candlefire_harness.pgwire import Target, dsn_target, proxied_dsn

#: The DelayProxy methods the child answers.
CALLS = frozenset({
    "set_rtt", "round_trips", "reset_counts", "connections", "wait_connections", "cut", "restore",
})  # fmt: skip
REPO_ROOT = Path(__file__).resolve().parents[1]


class DelayProxyProcess:
    """DelayProxy's API, the proxy in a child process; calls are thread-safe."""

    def __init__(self, target: Target, rtt_ms: float = 0.0) -> None:
        self.target = target
        self._rtt_ms = float(rtt_ms)
        self._lock = threading.Lock()
        path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
        self._child = subprocess.Popen(
            [sys.executable, "-m", "candlefire_harness.netdelay_process"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": path},
        )
        self.port: int = self._request((target, rtt_ms))

    @classmethod
    def for_dsn(cls, dsn: str, rtt_ms: float = 0.0) -> DelayProxyProcess:
        return cls(dsn_target(dsn), rtt_ms)

    def proxied_dsn(self, dsn: str) -> str:
        return proxied_dsn(dsn, self.port)

    @property
    def rtt_ms(self) -> float:
        return self._rtt_ms

    def set_rtt(self, rtt_ms: float) -> None:
        self._call("set_rtt", rtt_ms)
        self._rtt_ms = float(rtt_ms)

    def round_trips(self, application_name: str | None = None) -> int:
        return self._call("round_trips", application_name)

    def reset_counts(self) -> None:
        self._call("reset_counts")

    def connections(self) -> dict[str | None, int]:
        return self._call("connections")

    def wait_connections(
        self, count: int = 0, application_name: str | None = None, timeout: float = 10.0
    ) -> bool:
        return self._call("wait_connections", count, application_name, timeout)

    def cut(self, mode: str = "reset") -> None:
        self._call("cut", mode)

    def restore(self) -> None:
        self._call("restore")

    def close(self) -> None:
        """Close the child's stdin: it closes its proxy and exits (killed if it does not)."""
        with self._lock:
            if self._child.stdin.closed:
                return
            self._child.stdin.close()
            try:
                self._child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait()
            self._child.stdout.close()

    def __enter__(self) -> DelayProxyProcess:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _call(self, name: str, *args):
        return self._request((name, args))

    def _request(self, message):
        with self._lock:
            if self._child.stdin.closed:
                raise RuntimeError("the delay proxy process is closed")
            pickle.dump(message, self._child.stdin)
            self._child.stdin.flush()
            try:
                ok, value = pickle.load(self._child.stdout)
            except EOFError:
                raise RuntimeError(
                    f"the delay proxy process exited ({self._child.poll()})"
                ) from None
        if not ok:
            raise value
        return value


def serve(requests, replies) -> None:
    """The child: one DelayProxy, a call per request, until requests end."""
    target, rtt_ms = pickle.load(requests)
    with DelayProxy(target, rtt_ms) as proxy:
        _reply(replies, True, proxy.port)
        while True:
            try:
                name, args = pickle.load(requests)
            except EOFError:
                return
            try:
                if name not in CALLS:
                    raise AttributeError(f"DelayProxyProcess has no call {name!r}")
                _reply(replies, True, getattr(proxy, name)(*args))
            except Exception as exc:  # the caller's to handle: it is raised there
                _reply(replies, False, exc)


def _reply(replies, ok: bool, value) -> None:
    pickle.dump((ok, value), replies)
    replies.flush()


if __name__ == "__main__":
    channel = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the reply channel
    serve(sys.stdin.buffer, channel)
