"""Timing the parts of a command from outside it: the functions a module calls by name are
replaced, for a block, by wrappers recording each call's seconds and result."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType


@dataclass
class PartTimer:
    """Seconds and result of every call of each timed part, in call order."""

    seconds: dict[str, list[float]] = field(default_factory=dict)
    results: dict[str, list[object]] = field(default_factory=dict)

    def wrap(self, name: str, function: Callable) -> Callable:
        def timed(*args, **kwargs):
            started = time.perf_counter()
            result = None
            try:
                result = function(*args, **kwargs)
                return result
            finally:  # a part that raised is timed too (its result stays None)
                self.seconds.setdefault(name, []).append(time.perf_counter() - started)
                self.results.setdefault(name, []).append(result)

        return timed

    @contextmanager
    def timing(self, module: ModuleType, names: Sequence[str]) -> Iterator[PartTimer]:
        """`module`'s functions `names` timed for the block, then put back."""
        originals = {name: getattr(module, name) for name in names}
        try:
            for name, function in originals.items():
                setattr(module, name, self.wrap(name, function))
            yield self
        finally:
            for name, function in originals.items():
                setattr(module, name, function)
