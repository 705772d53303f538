"""Debian's headless Chromium driven by Selenium through Debian's chromedriver (no downloads)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from selenium import webdriver
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.actions.action_builder import ActionBuilder
from selenium.webdriver.common.keys import Keys

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
)
#: Selenium Manager would download a driver or browser it cannot find, and send usage stats:
#: both paths are given explicitly, and these keep it offline should anything still call it.
SELENIUM_OFFLINE_ENV = {"SE_OFFLINE": "true", "SE_AVOID_STATS": "true"}
#: How long one WebDriver command (a navigation, a script) may take.
COMMAND_LIMIT_S = 120


class BrowserError(RuntimeError):
    """Chromium or chromedriver failed to start, a command failed, or a page never got ready."""


def _binary(name: str) -> str:
    """Path of a Debian binary (chromium, chromedriver); .ci/install-browser installs both."""
    path = shutil.which(name)
    if path is None:
        raise BrowserError(f"{name} not found: run .ci/install-browser")
    return path


def chromium_binary() -> str:
    return _binary("chromium")


class HeadlessChromium:
    """One headless Chromium with one page, driven by Selenium over chromedriver."""

    def __init__(self, workdir: Path, *, width: int = 1800, height: int = 1200) -> None:
        self.workdir = workdir
        self.log_path = workdir / "chromedriver.log"
        profile = workdir / "profile"
        profile.mkdir(parents=True, exist_ok=True)
        os.environ.update(SELENIUM_OFFLINE_ENV)
        options = webdriver.ChromeOptions()
        options.binary_location = chromium_binary()
        for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                     f"--window-size={width},{height}"):  # fmt: skip
            options.add_argument(flag)
        service = Service(
            executable_path=_binary("chromedriver"),
            log_output=str(self.log_path),
            # a session of its own, like every server the tests start: Ctrl-C reaches pytest,
            # whose teardown stops the driver (close), not the driver behind its back
            popen_kw={"start_new_session": True},
        )
        try:
            self._driver = webdriver.Chrome(options=options, service=service)
        except WebDriverException as exc:
            self._stop_leftovers()
            raise BrowserError(f"chromium did not start: {exc.msg}\n{self._log_tail()}") from exc
        self._driver.set_page_load_timeout(COMMAND_LIMIT_S)
        self._driver.set_script_timeout(COMMAND_LIMIT_S)
        self._fit_viewport(width, height)

    def _fit_viewport(self, width: int, height: int) -> None:
        """The page's viewport width x height (the window is larger by the browser's frame)."""
        inner_w, inner_h = self.evaluate("[window.innerWidth, window.innerHeight]")
        if (inner_w, inner_h) != (width, height):
            self._driver.set_window_size(2 * width - inner_w, 2 * height - inner_h)

    def _log_tail(self) -> str:
        return procs.log_tail(self.log_path)

    def goto(self, url: str) -> None:
        """Navigate; readiness is up to the caller (an SPA loads its data after 'load')."""
        try:
            self._driver.get(url)
        except WebDriverException as exc:
            raise BrowserError(f"navigating to {url}: {exc.msg}") from exc

    def click_at(self, x: float, y: float) -> None:
        """A real left click (press + release) at a point of the viewport."""
        actions = ActionBuilder(self._driver)
        actions.pointer_action.move_to_location(round(x), round(y)).click()
        actions.perform()

    def press_key(self, code: str, key: str, *, alt: bool = False) -> None:
        """A real key press into the focused page, e.g. ("KeyE", "e", alt=True); chromedriver
        derives the code (KeyE) from the key on its US layout."""
        if code != f"Key{key.upper()}":
            raise ValueError(f"only letter keys are mapped: {code!r} / {key!r}")
        actions = ActionChains(self._driver)
        if alt:
            actions.key_down(Keys.ALT)
        actions.send_keys(key)
        if alt:
            actions.key_up(Keys.ALT)
        actions.perform()

    def evaluate(self, expression: str) -> Any:
        """Value of a JS expression in the page (a promise is awaited)."""
        try:
            return self._driver.execute_script(f"return (\n{expression}\n);")
        except WebDriverException as exc:
            raise BrowserError(f"JS error in {expression!r}: {exc.msg}") from exc

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
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self._driver.get_screenshot_as_png())
        return path

    def close(self) -> set[int]:
        """Quit Chromium and chromedriver; stop any helper left; return pids that needed KILL."""
        try:
            self._driver.quit()
        except Exception:  # a driver already gone: its leftovers are stopped below regardless
            pass
        return self._stop_leftovers()

    def _stop_leftovers(self) -> set[int]:
        killed = procs.stop_pids(procs.pids_with_arg(str(self.workdir)))
        left = procs.pids_with_arg(str(self.workdir))
        if left:
            raise BrowserError(f"chromium or chromedriver still running: {sorted(left)}")
        return killed
