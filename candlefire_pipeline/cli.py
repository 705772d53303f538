"""`candlefire`: demo, status, rollback, query, register-drops, fetch-pubmed."""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
from pathlib import Path

from candlefire_pipeline.settings import Settings, redact_dsn

INGEST_ASSETS = "papers,chunks,embeddings"
PARITY_ASSETS = "parity_report,serving_backend"


def _dagster(*args: str) -> None:
    """Materialize through the Dagster CLI, as CI and operators do."""
    cmd = [
        str(Path(sys.executable).with_name("dagster")),
        *args,
        "-m",
        "candlefire_pipeline.definitions",
    ]
    print("$", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True)


def register_drops(settings: Settings) -> list[str]:
    """Add a dynamic partition for every drop file (what the sensor does on its own)."""
    import dagster as dg

    from candlefire_pipeline.corpus.drop_scan import scan_drops
    from candlefire_pipeline.corpus.drops import validate_batch_key
    from candlefire_pipeline.defs.partitions import ingest_batches

    keys = [validate_batch_key(d.name) for d in scan_drops(settings.drops_dir)]
    with dg.DagsterInstance.get() as instance:
        known = set(instance.get_dynamic_partitions(ingest_batches.name))
        instance.add_dynamic_partitions(ingest_batches.name, [k for k in keys if k not in known])
    return keys


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.corpus.demo import write_demo_drops

    written = write_demo_drops(settings.drops_dir)
    print(f"wrote {len(written)} demo drops to {settings.drops_dir}")
    select = ",".join([INGEST_ASSETS, *(f"{store}_chunks" for store in settings.stores)])
    for key in register_drops(settings):
        _dagster("asset", "materialize", "--select", select, "--partition", key)
    _dagster("asset", "materialize", "--select", PARITY_ASSETS)
    return cmd_status(args, settings)


def cmd_register(args: argparse.Namespace, settings: Settings) -> int:
    keys = register_drops(settings)
    print(f"{len(keys)} drop partitions registered: {', '.join(keys)}")
    return 0


def cmd_status(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.status import collect_status, format_status

    status = collect_status(settings)
    print(format_status(status))
    return 0 if status.reachable else 2


def cmd_rollback(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.backends.pg_server import resolve_dsn
    from candlefire_pipeline.operations.serving import record_state

    state = record_state(
        settings.serving_file, resolve_dsn(settings), "chroma", None, args.reason or "rollback"
    )
    print(f"serving backend: {state.backend} (since {state.changed_at}: {state.reason})")
    return 0


def cmd_reader_role(args: argparse.Namespace, settings: Settings) -> int:
    import os

    from candlefire_pipeline.backends.pg_roles import ensure_reader_role
    from candlefire_pipeline.backends.pg_server import resolve_dsn

    password = os.environ.get(args.password_env) if args.password_env else None
    ensure_reader_role(resolve_dsn(settings), args.role, password, settings.pg_table)
    print(f"role {args.role!r} can read {settings.pg_table!r} and cannot write")
    return 0


def cmd_query(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.query import format_retrieval, run_query

    retrieval = run_query(settings, args.backend, args.text, args.entity, args.term)
    print(format_retrieval(retrieval, args.term))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="candlefire", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="write the demo drops and run the whole DAG through the CLI")
    sub.add_parser("register-drops", help="add a partition for every file in the drops folder")
    sub.add_parser("status", help="serving backend, last parity report, store health")
    rollback = sub.add_parser("rollback", help="serve from Chroma again, at once")
    rollback.add_argument("--reason", default="")
    reader = sub.add_parser("create-reader-role", help="a read-only Postgres role for serving")
    reader.add_argument("--role", default="candlefire_reader")
    reader.add_argument("--password-env", default="", help="env var holding the role's password")
    query = sub.add_parser("query", help="run the full retriever on one backend")
    query.add_argument("text")
    query.add_argument("--entity", action="append", default=[])
    query.add_argument("--term", action="append", default=[])
    query.add_argument(
        "--backend", choices=["pgvector", "chroma", "qdrant", "memory"], default="pgvector"
    )
    fetch = sub.add_parser("fetch-pubmed", help="write PubMed E-utilities results as a new drop")
    from candlefire_pipeline.pubmed_fetch import add_fetch_arguments

    add_fetch_arguments(fetch)
    return parser


COMMANDS = {
    "demo": cmd_demo,
    "register-drops": cmd_register,
    "status": cmd_status,
    "rollback": cmd_rollback,
    "query": cmd_query,
    "create-reader-role": cmd_reader_role,
}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    if args.command == "fetch-pubmed":
        from candlefire_pipeline.pubmed_fetch import main_fetch

        return main_fetch(args)
    settings = Settings.from_env()
    try:
        return COMMANDS[args.command](args, settings)
    except subprocess.CalledProcessError as exc:
        print(
            f"candlefire {args.command}: a Dagster step failed ({exc.returncode})", file=sys.stderr
        )
        return 1
    except (OSError, ValueError, RuntimeError) as exc:
        print(
            f"candlefire {args.command}: {exc} (pg: {redact_dsn(settings.pg_dsn)})", file=sys.stderr
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
