"""Writes one benchmark's latest figures into its own section of docs/BENCHMARKS.md."""

from __future__ import annotations

import fcntl
import platform
import re
import time
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parent.parent / "docs" / "BENCHMARKS.md"
HEADER = (
    "# Benchmarks\n\nLatest figures of the scripts in `benchmarks/`; each script rewrites only its"
    " own section.\nRatios are measured side by side in one process; timings are medians over"
    " repeats on a 2-core, no-GPU machine.\n"
)


def write_section(name: str, markdown: str) -> None:
    """Replace (or append) the section `name` of docs/BENCHMARKS.md."""
    stamp = f"_{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}_"
    block = f"<!-- bench:{name} -->\n{markdown.strip()}\n\n{stamp}\n<!-- /bench:{name} -->"
    BENCHMARKS_MD.parent.mkdir(parents=True, exist_ok=True)
    BENCHMARKS_MD.touch()
    with BENCHMARKS_MD.open("r+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        text = fh.read() or HEADER
        pattern = re.compile(
            rf"<!-- bench:{re.escape(name)} -->.*?<!-- /bench:{re.escape(name)} -->", re.S
        )
        text = pattern.sub(lambda _: block, text) if pattern.search(text) else f"{text}\n{block}\n"
        fh.seek(0)
        fh.truncate()
        fh.write(text)
