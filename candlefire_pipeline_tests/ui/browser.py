"""Debian's headless Chromium driven over the DevTools protocol (no selenium, no downloads)."""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

from candlefire_pipeline_tests import procs

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root in a container: the sandbox refuses to start there
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)


class BrowserError(RuntimeError):
    """Chromium failed to start, a DevTools command failed, or a page never got ready."""


def chromium_binary() -> str:
    """Path of Debian's chromium; .ci/install-browser installs it."""
    path = shutil.which("chromium")
    if path is None:
        raise BrowserError("chromium not found: run .ci/install-browser")
    return path


class HeadlessChromium:
    """One headless Chromium process with one page, driven over CDP (flattened session)."""

    def __init__(self, workdir: Path, *, width: int = 1800, height: int = 1200) -> None:
        self.workdir = workdir
        self.log_path = workdir / "chromium.log"
        profile = workdir / "profile"
        profile.mkdir(parents=True, exist_ok=True)
        self._ws = None
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)  # a reused profile holds the last run's port
        self._proc = procs.spawn(
            [
                chromium_binary(),
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            log_path=self.log_path,
        )
        procs.wait_until(
            lambda: port_file.exists() and len(port_file.read_text().splitlines()) >= 2,
            proc=self._proc,
            log_path=self.log_path,
            what="chromium",
        )
        port, path = port_file.read_text().splitlines()[:2]
        self._ws = connect(f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=30)
        self._ids = itertools.count(1)
        target = self._call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self._call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.page("Page.enable")
        self.page("Runtime.enable")
        self.page(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def _call(self, method: str, session: str | None = None, **params: Any) -> dict:
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        while True:
            reply = json.loads(self._ws.recv(timeout=120))
            if reply.get("id") != msg_id:
                continue  # an event, or a reply to someone else: this client is sequential
            if "error" in reply:
                raise BrowserError(f"{method}: {reply['error']}")
            return reply.get("result", {})

    def page(self, method: str, **params: Any) -> dict:
        """A CDP command to the page session."""
        return self._call(method, self._session, **params)

    def goto(self, url: str) -> None:
        """Navigate; readiness is up to the caller (an SPA loads its data after 'load')."""
        result = self.page("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError(f"navigating to {url}: {result['errorText']}")

    def click_at(self, x: float, y: float) -> None:
        """A real left click (press + release) at a point of the viewport."""
        for kind in ("mousePressed", "mouseReleased"):
            self.page("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def press_key(self, code: str, key: str, *, alt: bool = False) -> None:
        """A real key press (keyDown + keyUp) into the focused page, e.g. ("KeyE", "e", alt)."""
        modifiers = 1 if alt else 0
        for kind in ("keyDown", "keyUp"):
            self.page("Input.dispatchKeyEvent", type=kind, code=code, key=key, modifiers=modifiers)

    def evaluate(self, expression: str) -> Any:
        """Value of a JS expression in the page (awaits promises)."""
        result = self.page(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"JS error in {expression!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def body_text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def wait_for(
        self,
        condition: Callable[[], bool],
        *,
        describe: Callable[[], str],
        limit_s: float = procs.STARTUP_LIMIT_S,
    ) -> None:
        """Poll a page condition (an SPA renders after its GraphQL answers); fail with describe."""
        deadline = time.monotonic() + limit_s
        while not condition():
            if time.monotonic() >= deadline:
                raise BrowserError(f"page condition never held; {describe()}")
            time.sleep(0.5)

    def screenshot(self, path: Path) -> Path:
        """Save a PNG of the viewport."""
        data = self.page("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> set[int]:
        """Stop Chromium's process group and its escaped helpers; return pids that needed KILL."""
        if self._ws is not None:
            try:
                self._call("Browser.close")
            except Exception:  # the process group is stopped below regardless
                pass
            self._ws.close()
            self._ws = None
        killed = procs.stop_group(self._proc, first=signal.SIGTERM)
        killed |= procs.stop_pids(procs.pids_with_arg(str(self.workdir)))
        left = procs.pids_with_arg(str(self.workdir))
        if left:
            raise BrowserError(f"chromium helpers still running: {sorted(left)}")
        return killed
