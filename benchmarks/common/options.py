"""The options every benchmark spells the same way, each defined once, and what `--quick` sets.

An option's default is a `Default`: its value in a full run and, where it differs, in a
`--quick` run (small sizes, a few repeats, no section written); an option given on the command
line wins over both. `resolve` turns the defaults into this run's values after parsing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

_SAME = object()


@dataclass(frozen=True)
class Default:
    """The value of an option that was not given: `full`, or `quick` in a --quick run."""

    full: object
    quick: object = _SAME

    def value(self, quick: bool) -> object:
        return self.full if not quick or self.quick is _SAME else self.quick

    def __str__(self) -> str:
        shown = "all" if self.full is None else _text(self.full)
        return shown if self.quick is _SAME else f"{shown}; --quick: {_text(self.quick)}"


def _text(value: object) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "none"
    return str(value)


def resolve(args: argparse.Namespace) -> argparse.Namespace:
    """Every option left at its Default takes its value for this run (full or --quick)."""
    for name, value in vars(args).items():
        if isinstance(value, Default):
            setattr(args, name, value.value(args.quick))
    return args


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def count(text: str) -> int:
    """A whole number >= 0 (0 = none)."""
    return 0 if text.strip() == "0" else positive_int(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{value:g} is not a positive number")
    return value


def int_list(text: str) -> list[int]:
    """ "62196,250000" -> [62196, 250000]; every item a positive whole number."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} names no number")
    return [positive_int(item) for item in items]


def number_list(text: str) -> list[float]:
    """ "0,2,10" -> [0.0, 2.0, 10.0]; every item a number >= 0."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items:
        raise argparse.ArgumentTypeError(f"{text!r} names no number")
    values = []
    for item in items:
        try:
            value = float(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not a number") from None
        if not value >= 0:
            raise argparse.ArgumentTypeError(f"{value:g} is not a number >= 0")
        values.append(value)
    return values


def yes_no(text: str) -> bool:
    """ "yes" / "no" -> True / False."""
    if text.strip().lower() not in ("yes", "no"):
        raise argparse.ArgumentTypeError(f"{text!r} is not yes or no")
    return text.strip().lower() == "yes"


def names_of(choices: Sequence[str]) -> Callable[[str], list[str]]:
    """A parser of "a,b" into names, each one of `choices` (the error lists them)."""

    def parse(text: str) -> list[str]:
        picked = [item.strip() for item in text.split(",") if item.strip()]
        unknown = [name for name in picked if name not in choices]
        if unknown or not picked:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or repr(text)}: choose from {', '.join(choices)}"
            )
        return picked

    return parse


def _add(parser, flag: str, kind, full, quick, help: str, **kwargs) -> None:
    default = Default(full, quick)
    parser.add_argument(flag, type=kind, default=default, help=f"{help} (default {default})",
                        **kwargs)  # fmt: skip


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """What every benchmark takes: a quick run, and a run that writes nothing."""
    parser.add_argument(
        "--quick", action="store_true",
        help="small sizes and few repeats, to see that it runs; no section is written",
    )  # fmt: skip
    parser.add_argument(
        "--no-write", action="store_true", help="print the figures; docs/BENCHMARKS.md unchanged"
    )


def size(parser, full: int, quick=_SAME, help: str = "chunks in the corpus") -> None:
    _add(parser, "--size", positive_int, full, quick, help)


def sizes(parser, full: list[int], quick=_SAME, help: str = "corpus sizes, in chunks") -> None:
    _add(parser, "--sizes", int_list, full, quick, help)


def requests(parser, full: int, quick=_SAME, help: str = "full retrieve() requests") -> None:
    _add(parser, "--requests", positive_int, full, quick, help)


def repeats(parser, full: int, quick=_SAME, help: str = "repeats per measurement") -> None:
    _add(parser, "--repeats", positive_int, full, quick, help)


def seconds(parser, full: float, quick=_SAME, help: str = "seconds per measurement") -> None:
    _add(parser, "--seconds", positive_float, full, quick, help)


def texts(parser, full: int, quick=_SAME, help: str = "texts embedded") -> None:
    _add(parser, "--texts", positive_int, full, quick, help)


def docs(parser, quick=_SAME, help: str = "SciFact documents used") -> None:
    _add(parser, "--docs", positive_int, None, quick, help)


def parts(parser, choices: Sequence[str], full=None, quick=_SAME) -> None:
    """--parts: which of the benchmark's parts run (a part left out keeps its earlier figures
    where the benchmark keeps them per part)."""
    full = list(choices) if full is None else list(full)
    _add(parser, "--parts", names_of(choices), full, quick,
         f"comma-separated, of {', '.join(choices)}")  # fmt: skip


def stores(parser, choices: Sequence[str], full=None, quick=_SAME) -> None:
    full = list(choices) if full is None else list(full)
    _add(parser, "--stores", names_of(choices), full, quick,
         f"the stores measured, of {', '.join(choices)}")  # fmt: skip


def layouts(parser, choices: Sequence[str], full=None, quick=_SAME) -> None:
    full = list(choices) if full is None else list(full)
    _add(parser, "--layouts", names_of(choices), full, quick,
         f"pgvector layouts measured, of {', '.join(choices)}")  # fmt: skip


def option(parser, flag: str, kind, full, quick=_SAME, help: str = "") -> None:
    """A benchmark's own option, with its full and --quick values like the shared ones."""
    _add(parser, flag, kind, full, quick, help)
