"""The machine a benchmark ran on: CPU count and the load average sampled during the run."""

from __future__ import annotations

import os
import threading

#: Above this 1-minute load per CPU (the benchmark itself accounts for about 1) the figures
#: measure contention as much as code, so the section says so.
UNREPRESENTATIVE_LOAD_PER_CPU = 1.5


class LoadMonitor:
    """Samples os.getloadavg() every `every` seconds while the `with` block runs."""

    def __init__(self, every: float = 5.0) -> None:
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadMonitor:
        self.samples.append(os.getloadavg()[0])
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.samples.append(os.getloadavg()[0])

    @property
    def peak(self) -> float:
        return max(self.samples) if self.samples else os.getloadavg()[0]

    @property
    def unrepresentative(self) -> bool:
        return self.peak > UNREPRESENTATIVE_LOAD_PER_CPU * (os.cpu_count() or 1)

    def note(self) -> str:
        """One markdown line for the section: the load seen, flagged when it was too high."""
        cpus = os.cpu_count() or 1
        mean = sum(self.samples) / len(self.samples) if self.samples else self.peak
        line = (
            f"Machine load (1-min average) during the run: start {self.samples[0]:.1f},"
            f" mean {mean:.1f}, peak {self.peak:.1f}, end {self.samples[-1]:.1f} on {cpus} CPUs."
        )
        if self.unrepresentative:
            line += (
                f" **Unrepresentative: the load peaked above {UNREPRESENTATIVE_LOAD_PER_CPU:g} per"
                " CPU (other work shared the machine); re-run on a quiet machine.**"
            )
        return line
