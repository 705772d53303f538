"""Dagster's "[Show Markdown]" dialog: long markdown metadata opens behind a link, one per entry."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from candlefire_pipeline_tests import procs
from candlefire_pipeline_tests.ui.browser import BrowserError, HeadlessChromium

SHOW_MARKDOWN = "[Show Markdown]"
# The "[Show Markdown]" link in the metadata row whose key is %s, scrolled into view: the
# centre of its box, or null when the row shows its markdown inline.
_LINK_JS = """
(() => {
  const row = Array.from(document.querySelectorAll('tr'))
    .find(tr => tr.querySelector('td') && tr.querySelector('td').innerText.trim() === %s);
  const link = row && Array.from(row.querySelectorAll('*'))
    .find(el => el.textContent.trim() === '[Show Markdown]' && el.children.length === 0);
  if (!link) return null;
  link.scrollIntoView({block: 'center'});
  const r = link.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2, %s};
})()
"""
_DIALOG_OPEN_JS = "!!document.querySelector('[role=\"dialog\"]')"
# A click lost to a re-render (the page lays out again as its metadata loads) opens nothing;
# after this long without a dialog the link is clicked again.
RECLICK_AFTER_S = 5.0


def show_markdown_until(
    browser: HeadlessChromium,
    key: str,
    condition: Callable[[], bool],
    *,
    describe: Callable[[], str],
    limit_s: float = procs.STARTUP_LIMIT_S,
) -> None:
    """Open the markdown dialog of one metadata entry and wait until `condition` holds."""
    deadline = time.monotonic() + limit_s
    clicks = 0
    last_click = float("-inf")
    while not condition():
        now = time.monotonic()
        if now >= deadline:
            raise BrowserError(f"page condition never held after {clicks} clicks; {describe()}")
        if now - last_click >= RECLICK_AFTER_S and not browser.evaluate(_DIALOG_OPEN_JS):
            _click_link(browser, key, as_mouse=clicks == 0)
            clicks, last_click = clicks + 1, now
        time.sleep(0.5)


def _click_link(browser: HeadlessChromium, key: str, *, as_mouse: bool) -> None:
    """A real mouse click first; a retry clicks the element itself (immune to layout shifts)."""
    action = "clicked: false" if as_mouse else "clicked: (link.click(), true)"
    box = browser.evaluate(_LINK_JS % (json.dumps(key), action))
    if box is None:
        raise BrowserError(f"no {SHOW_MARKDOWN} in the {key} row: {browser.body_text()[:2000]}")
    if not box["clicked"]:
        for kind in ("mousePressed", "mouseReleased"):
            browser.page(
                "Input.dispatchMouseEvent", type=kind, button="left", clickCount=1,
                x=box["x"], y=box["y"],
            )  # fmt: skip
