"""A benchmark's figures: printed, and written to its own sections of docs/BENCHMARKS.md."""

from __future__ import annotations

import fcntl
import platform
import re
import time
from collections.abc import Iterable
from pathlib import Path

BENCHMARKS_MD = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"
HEADER = (
    "# Benchmarks\n\nLatest figures of `python -m benchmarks NAME` (`python -m benchmarks --list`"
    " names each benchmark, what it measures and the sections it writes); each rewrites only its"
    " own sections. `--quick` runs a benchmark at small sizes without writing.\nRatios are"
    " measured side by side in one process; timings are medians over repeats on a 2-core, no-GPU"
    " machine.\n"
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


class Output:
    """Where one run's figures go: always printed; written to the benchmark's own sections of
    docs/BENCHMARKS.md unless the run is `--quick` or `--no-write`. A section the benchmark does
    not declare is an error, so `python -m benchmarks --list` says what each one writes."""

    def __init__(self, benchmark: str, sections: Iterable[str], writes: bool) -> None:
        self.benchmark, self.sections, self.writes = benchmark, tuple(sections), writes

    def _check(self, name: str) -> None:
        if name not in self.sections:
            declared = ", ".join(self.sections) or "none"
            raise ValueError(
                f"benchmark {self.benchmark!r} writes the sections {declared}, not {name!r}"
            )

    def section(self, name: str, markdown: str) -> None:
        """Print the section's markdown, and write it unless this run writes nothing."""
        self._check(name)
        print(markdown)
        self.write(name, markdown)

    def write(self, name: str, markdown: str) -> None:
        """Write without printing (figures so far, rewritten while a long run goes on)."""
        self._check(name)
        if self.writes:
            write_section(name, markdown)
