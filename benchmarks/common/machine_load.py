"""The machine load during a run, and whether other work made its timings unrepresentative."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

from benchmarks.common.cpu_share import CpuShare
from candlefire_pipeline.parity import metrics

#: 1-minute load per CPU above which wall-clock figures measure contention as much as code:
#: on average over the run, or at its peak (the benchmark itself accounts for about 1). Used
#: only where /proc cannot tell other processes' CPU from the benchmark's own.
BUSY_MEAN_LOAD_PER_CPU = 0.75
BUSY_PEAK_LOAD_PER_CPU = 1.5
#: Share of all CPUs used by other processes above which a run is flagged: on average (a
#: third of a core on this 2-core machine), or in any one sampling interval (one full core).
OTHERS_MEAN_SHARE = 0.15
OTHERS_PEAK_SHARE = 0.5


class LoadMonitor:
    """Samples the load average and other processes' CPU share every `every` seconds.

    `markers`: folders of the servers the benchmark starts (their CPU is the benchmark's own).
    Use as `with LoadMonitor() as load:` or `load = LoadMonitor().start(); ...; load.stop()`.
    """

    def __init__(self, every: float = 5.0, markers: Sequence[str | os.PathLike] = ()) -> None:
        self.every = every
        self.samples: list[float] = []
        self.others = CpuShare(markers)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-monitor", daemon=True)

    def _sample(self) -> None:
        self.samples.append(os.getloadavg()[0])
        self.others.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self._sample()

    def start(self) -> LoadMonitor:
        self._sample()
        self._thread.start()
        return self

    def stop(self) -> LoadMonitor:
        self._stop.set()
        self._thread.join()
        self._sample()
        return self

    def __enter__(self) -> LoadMonitor:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def peak(self) -> float:
        return max(self.samples) if self.samples else os.getloadavg()[0]

    @property
    def mean(self) -> float:
        return metrics.mean(self.samples) if self.samples else self.peak

    @property
    def unrepresentative(self) -> bool:
        shares = self.others.shares
        if shares:
            return metrics.mean(shares) > OTHERS_MEAN_SHARE or max(shares) > OTHERS_PEAK_SHARE
        cpus = os.cpu_count() or 1
        return (
            self.mean > BUSY_MEAN_LOAD_PER_CPU * cpus or self.peak > BUSY_PEAK_LOAD_PER_CPU * cpus
        )

    def note(self) -> str:
        """One markdown line for the section: the load seen, flagged when it was too high."""
        samples = self.samples or [self.peak]
        line = (
            f"Machine load (1-min average) during the run: start {samples[0]:.1f},"
            f" mean {self.mean:.1f}, peak {self.peak:.1f}, end {samples[-1]:.1f}"
            f" on {os.cpu_count() or 1} CPUs."
        )
        shares = self.others.shares
        if shares:
            line += (
                f" Other processes (not this benchmark or the servers it started) used"
                f" {100 * metrics.mean(shares):.0f}% of the CPUs on average, at most"
                f" {100 * max(shares):.0f}% in a {self.every:g}-s interval."
            )
        if self.unrepresentative:
            line += (
                " **Unrepresentative: other work shared the machine; wall-clock figures and"
                " ratios are preliminary and must be re-run on a quiet machine.**"
            )
        return line
