"""Dagster's "[Show Markdown]" dialog: long markdown metadata opens behind a link, one per entry."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from candlefire_pipeline_tests.ui.browser import BrowserError, HeadlessChromium

SHOW_MARKDOWN = "[Show Markdown]"
# The link (JSON string %s) in the metadata row whose key is %s, scrolled into view and clicked
# as an element when %s: the centre of its box, or null when the row shows its markdown inline.
_LINK_JS = """
(() => {
  const [text, key, clickElement] = [%s, %s, %s];
  const row = Array.from(document.querySelectorAll('tr'))
    .find(tr => tr.querySelector('td') && tr.querySelector('td').innerText.trim() === key);
  const link = row && Array.from(row.querySelectorAll('*'))
    .find(el => el.textContent.trim() === text && el.children.length === 0);
  if (!link) return null;
  link.scrollIntoView({block: 'center'});
  if (clickElement) link.click();
  const r = link.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2};
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
) -> None:
    """Open the markdown dialog of one metadata entry and wait until `condition` holds."""
    clicks: list[float] = []  # when the link was clicked

    def shown() -> bool:
        if condition():
            return True
        due = not clicks or time.monotonic() - clicks[-1] >= RECLICK_AFTER_S
        if due and not browser.evaluate(_DIALOG_OPEN_JS):
            _click_link(browser, key, retry=bool(clicks))
            clicks.append(time.monotonic())
        return False

    browser.wait_for(shown, describe=lambda: f"after {len(clicks)} clicks: {describe()}")


def _click_link(browser: HeadlessChromium, key: str, *, retry: bool) -> None:
    """A real mouse click first; a retry clicks the element itself (immune to layout shifts)."""
    args = (json.dumps(SHOW_MARKDOWN), json.dumps(key), json.dumps(retry))
    box = browser.evaluate(_LINK_JS % args)
    if box is None:
        raise BrowserError(f"no {SHOW_MARKDOWN} in the {key} row: {browser.body_text()[:2000]}")
    if not retry:
        browser.click_at(box["x"], box["y"])
