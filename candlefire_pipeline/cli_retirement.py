"""`candlefire retire` and `candlefire unretire`: the migration's last steps and its way back."""

from __future__ import annotations

import argparse
import sys

from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import STORE_NAMES


def _told(verb: str, outcome) -> int:
    """The switch's answer on the terminal; 1 when refused (nothing changed)."""
    from candlefire_pipeline.operations.serving.machine import CHANGED, UNCHANGED

    decision, state = outcome.decision, outcome.state
    if decision.outcome == CHANGED:
        print(f"serving backend: {state.backend} - {state.describe()}")
    elif decision.outcome == UNCHANGED:
        print(f"serving backend: {state.backend} - nothing to do: {decision.message}")
    else:
        print(f"candlefire {verb}: refused, nothing changed: {decision.message}", file=sys.stderr)
        print(f"serving backend stays {state.describe()}", file=sys.stderr)
    if outcome.history.pending:
        print(
            f"warning: {outcome.history.pending} serving history change(s) queued locally "
            f"({outcome.history.warning or 'Postgres unreachable'})",
            file=sys.stderr,
        )
    return 0 if decision.outcome in (CHANGED, UNCHANGED) else 1


def cmd_retire(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.retirement.commands import retire

    done = retire(settings, args.store, args.reason, args.by, args.delete_files, say=print)
    code = _told("retire", done.outcome)
    if args.delete_files and code == 0 and done.export is None:
        print(f"candlefire retire: {args.store} is not retired: its files stay", file=sys.stderr)
        return 1
    return code


def cmd_unretire(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.retirement.commands import unretire

    return _told("unretire", unretire(settings, args.store, args.reason, args.by, say=print))


def refuse_retired(settings: Settings, store: str, verb: str) -> int | None:
    """2 (said on stderr) when `store` is retired: a verb that writes or reads it must not."""
    from candlefire_pipeline.operations.retirement.view import retired_note, retired_stores

    retirement = retired_stores(settings).get(store)
    if retirement is None:
        return None
    print(
        f"candlefire {verb}: {retired_note(store, retirement)}; `candlefire unretire {store} "
        '--reason "..."` rebuilds it from the ledger and checks it',
        file=sys.stderr,
    )
    return 2


def add_parser(add) -> None:
    """The `retire` and `unretire` verbs (`add` makes a verb that takes the common options)."""
    retire = add(
        "retire",
        help="stop writing chroma once pgvector has served the default generation through the "
        "soak (CANDLEFIRE_RETIRE_SOAK_DAYS) on passing evidence",
    )
    retire.add_argument("store", choices=STORE_NAMES, help="the store to retire (chroma)")
    retire.add_argument("--reason", required=True, help="why (recorded in the history)")
    retire.add_argument("--by", default=None, help="who (default: the login name)")
    retire.add_argument(
        "--delete-files",
        action="store_true",
        help="once retired: export its ledger state to data/retired/, then delete its files",
    )
    unretire = add(
        "unretire",
        help="rebuild a retired store from the ledger's batch files, check it, and make it a "
        "rollback target again",
    )
    unretire.add_argument("store", choices=STORE_NAMES, help="the retired store (chroma)")
    unretire.add_argument("--reason", required=True, help="why (recorded in the history)")
    unretire.add_argument("--by", default=None, help="who (default: the login name)")
