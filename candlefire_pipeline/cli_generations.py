"""`candlefire generation ...`: create, list, build, compare and gc index generations."""

from __future__ import annotations

import argparse
import functools
import sys

from candlefire_pipeline.settings import Settings


def _size(value: int | None) -> str:
    if value is None:
        return "n/a"
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return ""


def format_generations(statuses) -> str:
    lines = []
    for status in statuses:
        generation = status.generation
        role = f", {status.role}" if status.role else ""
        default = " (default)" if generation.default else ""
        lines.append(f"{generation.name}{default} [{generation.gid}] {status.state}{role}")
        lines.append(f"  identity: {generation.identity.describe()}")
        lines.append(f"  model: {generation.model} (built with {generation.build_runtime})")
        if generation.created_at:
            lines.append(f"  created: {generation.created_at} by {generation.created_by}")
        if generation.dropped_at:
            lines.append(f"  dropped: {generation.dropped_at}")
        for store, target in status.targets.items():
            if store in status.errors:
                lines.append(f"  {store} {target}: UNREACHABLE - {status.errors[store]}")
            elif store in status.chunks:
                lines.append(
                    f"  {store} {target}: {status.chunks[store]:,} chunks, "
                    f"{status.lag.get(store, 0)} drops behind, {_size(status.bytes.get(store))}"
                )
    return "\n".join(lines)


def cmd_create(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.generations.identity import LAYOUTS, IndexLayout
    from candlefire_pipeline.generations.registry import settings_identity
    from candlefire_pipeline.operations.generations.lifecycle import create_generation
    from candlefire_pipeline.operations.serving.commands import operator

    base = settings_identity(settings, 1).layout
    layout = IndexLayout.named(
        args.layout or {v: k for k, v in LAYOUTS.items()}[(base.vector_type, base.quantization)],
        hnsw_m=args.hnsw_m or base.hnsw_m,
        hnsw_ef_construction=args.hnsw_ef_construction or base.hnsw_ef_construction,
    )
    created = create_generation(
        settings, args.name, args.model, args.runtime, layout, args.chunker, args.by or operator()
    )
    print(f"generation {created.name} [{created.gid}] created: {created.identity.describe()}")
    print(
        "next: reload the code location (UI: Deployment > Reload; or restart `dg dev`) so new "
        f"drops feed it, then `candlefire generation build {created.name}`"
    )
    return 0


def cmd_list(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.generations.lifecycle import (
        environment_drift,
        inspect_generations,
    )

    statuses = inspect_generations(settings)
    default = next(s.generation for s in statuses if s.generation.default)
    drift = environment_drift(settings, default)
    if drift:
        print(f"warning: {drift}", file=sys.stderr)
    print(format_generations(statuses))
    return 2 if any(s.errors for s in statuses) else 0


def add_parser(add, common: argparse.ArgumentParser) -> None:
    """The `generation` command group (`add` makes a verb that takes the common options)."""
    from candlefire_pipeline.generations.identity import LAYOUTS
    from candlefire_pipeline.settings import EMBED_RUNTIMES

    group = add("generation", help="index generations: create, list, build, compare, gc")
    sub = group.add_subparsers(dest="generation_command", required=True)
    verb = functools.partial(sub.add_parser, parents=[common])
    create = verb("create", help="record a new index identity (build it next)")
    create.add_argument("name", help="lower case, a letter first, <= 24 characters")
    create.add_argument("--model", required=True, help="model id or path (hashing-v1:N in tests)")
    create.add_argument("--runtime", choices=sorted(EMBED_RUNTIMES), help="default: bulk runtime")
    create.add_argument("--layout", choices=LAYOUTS, help="default: the settings' layout")
    create.add_argument("--chunker", help="chunker version (default: the drops' chunker)")
    create.add_argument("--hnsw-m", type=int, help="HNSW m (default: CANDLEFIRE_HNSW_M)")
    create.add_argument("--hnsw-ef-construction", type=int, help="HNSW ef_construction")
    create.add_argument("--by", default=None, help="who (default: the login name)")
    verb("list", help="every generation: state, chunks per store, ledger lag, bytes")
    compare = verb("compare", help="judge it against what serves (the promote gates)")
    compare.add_argument("name")
    compare.add_argument(
        "--backend", choices=("pgvector", "chroma", "qdrant"),
        help="the candidate's backend (default: pgvector, where promote goes)",
    )  # fmt: skip
    gc = verb("gc", help="drop unused generations (a dry run unless --apply)")
    gc.add_argument("--apply", action="store_true", help="drop what the dry run lists")
    gc.add_argument("--retention-days", type=float, help="default: retention setting")
    build = verb("build", help="Dagster runs of its assets over the drops it lacks")
    build.add_argument("name")
    build.add_argument("--per-run", type=int, help="drops per run (default: backfill setting)")


def cmd_build(args: argparse.Namespace, settings: Settings) -> int:
    # Dagster is loaded only by the verb that drives it, from the Dagster layer
    from candlefire_pipeline.definitions import defs
    from candlefire_pipeline.defs.generations.build import build_generation
    from candlefire_pipeline.operations.generations.lifecycle import registry

    generation = registry(settings).get(args.name)
    if generation.default or not generation.live:
        why = "is fed by the pipeline's own assets" if generation.default else "is not live"
        print(f"candlefire generation build: {args.name} {why}", file=sys.stderr)
        return 1
    per_run = args.per_run or settings.backfill_partitions_per_run
    return build_generation(settings, generation, per_run, defs)


def cmd_compare(args: argparse.Namespace, settings: Settings) -> int:
    """0: every gate passes (what a promotion of it needs), 1: a gate fails."""
    from candlefire_pipeline.generations.view import reports_dir
    from candlefire_pipeline.operations.generations.compare import run_comparison
    from candlefire_pipeline.operations.generations.lifecycle import registry
    from candlefire_pipeline.parity.gates import failed, format_gate_table, gates_from_dicts

    report = run_comparison(settings, args.name, args.backend)
    generation = registry(settings).get(args.name)
    json_path, md_path = report.write(reports_dir(settings, generation))
    gates = gates_from_dicts(report.gates)
    ref, cand = report.target("reference"), report.target("candidate")
    print(f"comparison {report.report_id}: {'/'.join(cand)} vs {'/'.join(ref)} (serving)")
    print(f"kind: {report.kind} - {report.why}")
    print(format_gate_table(gates))
    print(f"report: {md_path}")
    names = failed(gates)
    print("verdict: " + (f"FAILS {', '.join(names)}" if names else "passes every gate"))
    return 1 if names else 0


def cmd_gc(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.generations.gc import apply_gc, plan_gc

    days = (
        settings.generations.retention_days if args.retention_days is None else args.retention_days
    )
    plan = plan_gc(settings, days)
    verb = "dropping" if args.apply else "would drop"
    for generation, why in plan.drop:
        print(f"{verb} {generation.name} [{generation.gid}]: {why}")
    for generation, why in plan.keep:
        print(f"keeping {generation.name} [{generation.gid}]: {why}")
    if not plan.drop:
        print("nothing to drop")
    elif not args.apply:
        print("dry run: run again with --apply to drop them")
    else:
        dropped = apply_gc(settings, plan, lambda line: print(f"  {line}"))
        print(f"dropped: {', '.join(dropped) or 'none'}")
    return 0


VERBS = {
    "create": cmd_create,
    "list": cmd_list,
    "build": cmd_build,
    "compare": cmd_compare,
    "gc": cmd_gc,
}


def cmd_generation(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.generations.registry import GenerationError

    try:
        return VERBS[args.generation_command](args, settings)
    except GenerationError as exc:
        print(f"candlefire generation {args.generation_command}: {exc}", file=sys.stderr)
        return 1
