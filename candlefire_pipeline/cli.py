"""`candlefire`: demo, status, rollback, promote, retire, unretire, query, repair, maintain,
register-drops, fetch-pubmed, create-reader-role, generation (create, list, build, compare, gc),
adopt (report, import, status), replica (create, start, stop, status, remove), backup (enable,
take, list, prune), restore."""

from __future__ import annotations

import argparse
import functools
import logging
import re
import sys
from datetime import date
from pathlib import Path

from candlefire_pipeline import cli_adopt, cli_backup, cli_replica, cli_serving
from candlefire_pipeline.settings import Settings, redact_dsn
from candlefire_pipeline.stores import BACKEND_NAMES

#: Commands an operator runs under pressure: any failure is one line on stderr, not a traceback.
OPERATOR_COMMANDS = (
    "status", "rollback", "promote", "query", "retire", "unretire", "replica", "backup",
    "restore",
)  # fmt: skip


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    # Dagster is imported only by the verbs that drive it, from the Dagster layer (defs/)
    from candlefire_pipeline.defs.demo_launch import run_demo
    from candlefire_pipeline.defs.drop_registration import register_drops

    return run_demo(settings, lambda s: register_drops(s, source="candlefire demo"))


def cmd_register(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.defs.drop_registration import register_drops

    keys = register_drops(settings, warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(f"{len(keys)} drop partitions registered: {', '.join(keys)}")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.status import collect_status, format_status

    status = collect_status(settings)
    print(format_status(status))
    return 0 if status.reachable else 2


def cmd_reader_role(args: argparse.Namespace, settings: Settings) -> int:
    import os

    from candlefire_pipeline.backends.factory import resolve_dsn
    from candlefire_pipeline.backends.pg.roles import ensure_reader_role

    password = os.environ.get(args.password_env) if args.password_env else None
    ensure_reader_role(resolve_dsn(settings), args.role, password, settings.pg_table)
    print(f"role {args.role!r} can read {settings.pg_table!r} and cannot write")
    return 0


def cmd_query(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.query import format_retrieval, run_query

    if args.generation:
        if args.backend == "serving":
            raise ValueError("--generation needs --backend (serving follows the switch)")
        from candlefire_pipeline.generations.view import generation_settings
        from candlefire_pipeline.operations.generations.lifecycle import registry

        settings = generation_settings(settings, registry(settings).get(args.generation))
    backend, retrieval = run_query(settings, args.backend, args.text, args.entity, args.term)
    if args.backend == "serving":
        print(f"serving backend: {backend} (as the app reads it: switch + override)")
    print(format_retrieval(retrieval))
    return 0


def add_fetch_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `candlefire fetch-pubmed`."""
    from candlefire_pipeline.corpus.pubmed import DATE_TYPES, EFETCH_BATCH

    iso_date = date.fromisoformat
    parser.add_argument("--query", required=True, help="PubMed query, e.g. 'SPG302 OR TDP-43'")
    parser.add_argument("--since", required=True, type=iso_date, help="first date, YYYY-MM-DD")
    parser.add_argument("--until", type=iso_date, help="last date, YYYY-MM-DD (default: today)")
    parser.add_argument("--max", dest="max_records", type=int, help="fetch at most N records")
    parser.add_argument(
        "--batch-size", type=int, default=EFETCH_BATCH, help="records per efetch request"
    )
    parser.add_argument("--datetype", choices=DATE_TYPES, default="edat", help="edat: added")
    parser.add_argument("--drops-dir", type=Path, help="default: the configured drops folder")


def cmd_fetch(args: argparse.Namespace, settings: Settings, transport=None) -> int:
    """0 ok (also when nothing matched), 1 E-utilities failed, 2 bad input."""
    from candlefire_pipeline.corpus.pubmed import PubmedFetchError, fetch_pubmed

    options = {k: getattr(args, k) for k in ("until", "batch_size", "max_records", "datetype")}
    credentials = {"api_key": settings.ncbi_api_key, "email": settings.ncbi_email}
    drops_dir = args.drops_dir or settings.drops_dir
    try:
        result = fetch_pubmed(
            args.query, args.since, drops_dir, **options, **credentials, transport=transport
        )
    except (ValueError, PubmedFetchError, OSError) as exc:
        print(f"candlefire fetch-pubmed: failed: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ValueError) else 1
    written = f"{result.count} records in {result.path}" if result.path else "no new records"
    print(f"fetch-pubmed: {written} ({result.requests} requests, {result.retries} retries)")
    return 0


def cmd_repair(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when the store matches its ledger view (after --apply), 1 when it does not."""
    from candlefire_pipeline.backends.factory import opened_backend
    from candlefire_pipeline.operations.repair import format_repair, repair_store

    if (refused := cli_serving.refuse_retired(settings, args.store, "repair")) is not None:
        return refused
    with opened_backend(args.store, settings) as backend:
        try:
            report = repair_store(backend, settings.batches_dir, apply=args.apply)
        except Exception as exc:  # a store failing mid-repair is a report, not a trace
            print(f"candlefire repair: {args.store}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    print(format_repair(report))
    return 0 if report.converged else 1


def cmd_maintain(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when every store answered and every action run (or a dry run), 2 otherwise."""
    from candlefire_pipeline.operations.maintenance import format_maintenance, maintain

    report = maintain(settings, apply=args.apply)
    print(format_maintenance(report))
    return 2 if report.failed else 0


def cmd_generation(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.cli_generations import cmd_generation as run_verb

    return run_verb(args, settings)


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-v", "--verbose", action="store_true", help="also show library logs below WARNING"
    )
    parser = argparse.ArgumentParser(prog="candlefire", description=__doc__, parents=[common])
    sub = parser.add_subparsers(dest="command", required=True)
    add = functools.partial(sub.add_parser, parents=[common])
    add("demo", help="write the demo drops and run the whole DAG through the CLI")
    add("register-drops", help="add a partition for every file in the drops folder")
    add("status", help="serving backend, last parity report, store health")
    cli_serving.add_parser(add)
    reader = add("create-reader-role", help="a read-only Postgres role for serving")
    reader.add_argument("--role", default="candlefire_reader")
    reader.add_argument("--password-env", default="", help="env var holding the role's password")
    query = add("query", help="run the full retriever on one backend")
    query.add_argument("text")
    query.add_argument("--entity", action="append", default=[])
    query.add_argument(
        "--term",
        action="append",
        default=None,
        help="a keyword/grounding term (repeatable); without any, the identifier tokens of the "
        "text are taken, as the app does",
    )
    query.add_argument(
        "--backend",
        choices=["serving", *BACKEND_NAMES],
        default="serving",
        help="serving (default) follows the switch exactly as the app does",
    )
    query.add_argument("--generation", help="query this index generation (with --backend)")
    repair = add("repair", help="reconcile a store with the ledger (dry run by default)")
    repair.add_argument("--store", choices=BACKEND_NAMES, required=True)
    repair.add_argument("--apply", action="store_true", help="fix what the dry run reports")
    maintain = add(
        "maintain", help="index health of every store; --apply vacuums / rebuilds (dry run default)"
    )
    maintain.add_argument(
        "--apply", action="store_true", help="run what the dry run reports (never blocks serving)"
    )
    fetch = add("fetch-pubmed", help="write PubMed E-utilities results as a new drop")
    add_fetch_arguments(fetch)
    from candlefire_pipeline import cli_generations

    cli_generations.add_parser(add, common)
    cli_adopt.add_parser(add)
    cli_replica.add_parser(add)
    cli_backup.add_parser(add)
    return parser


COMMANDS = {
    "demo": cmd_demo,
    "register-drops": cmd_register,
    "status": cmd_status,
    "query": cmd_query,
    "create-reader-role": cmd_reader_role,
    "repair": cmd_repair,
    "maintain": cmd_maintain,
    "fetch-pubmed": cmd_fetch,
    "generation": cmd_generation,
    **cli_serving.COMMANDS,
    **cli_adopt.COMMANDS,
    "replica": cli_replica.cmd_replica,
    **cli_backup.COMMANDS,
}


#: What the CLI says in an install of the app's read path only (no extra `pipeline`).
SLIM_INSTALL = (
    "this install holds the app's read path only: "
    "pip install 'candlefire_pipeline[pipeline]' for the CLI"
)


@functools.cache
def missing_pipeline() -> list[str]:
    """Distributions of the extra `pipeline` (and the extras it names) not installed; [] when
    the package has no installed metadata (a source tree on the path)."""
    from importlib import metadata

    try:
        requires = [_requirement(line) for line in metadata.requires("candlefire_pipeline") or []]
    except metadata.PackageNotFoundError:
        return []
    extras = {"pipeline"}  # and those it builds on: `candlefire_pipeline[onnx,chroma]`
    extras |= {e for project, named, extra in requires if project is None and extra in extras
               for e in named}  # fmt: skip
    missing = []
    for project, _, extra in sorted(requires, key=lambda r: r[2] != "pipeline"):  # its own first
        if project is not None and extra in extras:
            try:
                metadata.version(project)
            except metadata.PackageNotFoundError:
                missing.append(project)
    return missing


def _requirement(line: str) -> tuple[str | None, list[str], str | None]:
    """(project, or None for this package; the extras it names; the extra it belongs to) of a
    Requires-Dist line such as `dagster==1.13.27; extra == "pipeline"`."""
    project, named = re.match(r"\s*([\w.-]+)\s*(?:\[([^]]*)\])?", line).groups()
    extra = re.search(r"extra\s*==\s*[\"']([\w.-]+)[\"']", line)
    ours = re.sub(r"[-_.]+", "_", project.lower()) == "candlefire_pipeline"
    return (None if ours else project, [e.strip() for e in named.split(",")] if named else [],
            extra and extra[1])  # fmt: skip


def configure_output(verbose: bool) -> None:
    """The terminal shows each verb's own output; library logs only from WARNING up and Python
    warnings not at all (both in full with --verbose)."""
    level = logging.INFO if verbose else logging.WARNING
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger().setLevel(level)
    logging.captureWarnings(not verbose)
    # captured warnings (e.g. platformdirs' RuntimeDirWarning) are for developers, not operators
    logging.getLogger("py.warnings").setLevel(logging.WARNING if verbose else logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    missing = missing_pipeline()
    if missing:  # one line, not the traceback of the first verb that imports one of them
        print(f"candlefire: {SLIM_INSTALL} (missing: {', '.join(missing[:3])}"
              f"{', ...' if len(missing) > 3 else ''})", file=sys.stderr)  # fmt: skip
        return 2
    args = _parser().parse_args(argv)
    configure_output(args.verbose)
    try:
        # a rollback must work even when a gate threshold in the environment is out of range
        settings = Settings.from_env(parity=args.command != "rollback")
    except ValueError as exc:
        print(f"candlefire {args.command}: {exc}", file=sys.stderr)
        return 2
    try:
        return COMMANDS[args.command](args, settings)
    except (OSError, ValueError, RuntimeError) as exc:
        print(
            f"candlefire {args.command}: {exc} (pg: {redact_dsn(settings.pg_dsn)})", file=sys.stderr
        )
        return 2
    except Exception as exc:  # an operator gets one line, never a traceback
        if args.command not in OPERATOR_COMMANDS:
            raise
        print(
            f"candlefire {args.command}: {type(exc).__name__}: {exc} "
            f"(pg: {redact_dsn(settings.pg_dsn)})",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
