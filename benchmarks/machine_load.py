"""The machine load a benchmark ran under and whether it is representative."""

from __future__ import annotations

import os
import threading

#: 1-minute load per core above which wall-clock figures are flagged as unrepresentative.
BUSY_LOAD_PER_CORE = 0.75


class LoadSampler:
    """Samples os.getloadavg()[0] every `every` seconds on a daemon thread, until stop()."""

    def __init__(self, every: float = 5.0) -> None:
        self.samples: list[float] = [os.getloadavg()[0]]
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> LoadSampler:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])
        return self

    def note(self) -> str:
        """One markdown line: load range over the run, cores, and the representativeness flag."""
        return load_note(self.samples)


def load_note(samples: list[float]) -> str:
    cores = os.cpu_count() or 1
    low, high = min(samples), max(samples)
    mean = sum(samples) / len(samples)
    line = (
        f"Machine load (1-min average, sampled during the run): {low:.1f}-{high:.1f}, mean"
        f" {mean:.1f}, on {cores} cores."
    )
    if mean > BUSY_LOAD_PER_CORE * cores:
        line += (
            " **Unrepresentative: the machine was shared with other work; wall-clock figures and"
            " ratios are preliminary and must be re-run on a quiet machine.**"
        )
    return line
