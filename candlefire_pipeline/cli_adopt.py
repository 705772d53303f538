"""`candlefire adopt report | import | status`: the collection the app serves, read (never
written): how it differs from the ledger id by id, its import as the ledger's first batches, and
where the adoption stands (docs/OPERATIONS.md, "Adopting the app's collection")."""

from __future__ import annotations

import argparse
import json
import sys

from candlefire_pipeline.settings import Settings


def add_parser(add) -> None:
    adopt = add("adopt", help="the app's own Chroma collection: report, import, status")
    verbs = adopt.add_subparsers(dest="adopt_verb", required=True)
    report = verbs.add_parser("report", help="classify every id of the app's collection")
    report.add_argument("--json", action="store_true", help="print the report as JSON")
    verbs.add_parser("import", help="seed the ledger and every written store from it")
    verbs.add_parser("status", help="its fingerprint now, the latest report, the import")


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def cmd_adopt(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 0 when done, 2 on an error (one line naming it; nothing written)."""
    from candlefire_pipeline.embedding import embedder_for

    if args.adopt_verb == "status":
        return _status(settings)
    embedder = embedder_for(settings, "bulk")
    if args.adopt_verb == "report":
        from candlefire_pipeline.operations.adoption.report import build_report, class_table

        report, _ = build_report(settings, embedder, _progress)
        if args.json:
            print(json.dumps(report.to_dict(), indent=1))
            return 0
        print(f"adoption report {report.report_id}: {report.headline()}")
        print(class_table(report))
        print(f"model check: {report.model['summary']}")
        print(f"import: {report.imported['summary']}")
        print(f"written to {settings.adoption_dir / 'reports' / report.report_id}")
        return 0
    from candlefire_pipeline.operations.adoption.importer import run_import

    result = run_import(settings, embedder, _progress)
    for store, figures in result.applied.items():
        print(f"{store}: {figures['rows_written']} rows written, {figures['papers_replaced']} "
              f"papers, {figures['papers_unchanged']} unchanged, {figures['papers_superseded']} "
              "superseded by a drop")  # fmt: skip
    print(result.summary())
    return 0


def _status(settings: Settings) -> int:
    from candlefire_pipeline.operations.adoption.reference import adoption_now

    now = adoption_now(settings)
    if not now:
        print("no app collection is configured (CANDLEFIRE_APP_CHROMA_PATH or _HOST)")
        return 0
    if "error" in now:
        print(f"candlefire adopt status: {now['error']}", file=sys.stderr)
        return 2
    current = now["report_fingerprint"] == now["fingerprint"]
    print(f"app collection: {settings.app_collection.where}, fingerprint {now['fingerprint'][:16]}")
    report = now["report_id"] or "none"
    print(f"adoption report: {report} ({'current' if current else 'NOT current: re-run it'})")
    print(f"import: {now['imported']['summary']}")
    return 0


COMMANDS = {"adopt": cmd_adopt}
