"""`candlefire rollback`, `promote`, `retire` and `unretire`: the verbs that move the serving
switch, their shared options (--reason, --by) and what they print."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CANDIDATE, SERVABLE_STORES, STORE_NAMES

if TYPE_CHECKING:
    from candlefire_pipeline.operations.serving.commands import Order


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
            f"({outcome.history.warning or 'Postgres unreachable'}); replayed on the next "
            "successful connection",
            file=sys.stderr,
        )
    return 0 if decision.outcome in (CHANGED, UNCHANGED) else 1


def _order(args: argparse.Namespace) -> Order:
    """The order the verb's options give: why (--reason) and who (--by, else the login name)."""
    from candlefire_pipeline.operations.serving.commands import Order, operator

    return Order(args.command, args.reason, args.by or operator())


def cmd_rollback(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.serving.commands import rollback

    # refused only where Chroma is retired: the message says what restores it
    return _told("rollback", rollback(settings, _order(args)))


def cmd_promote(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.serving.commands import promote

    if not args.generation:
        outcome = promote(settings, _order(args), run_new_report=args.run_report)
        return _told("promote", outcome)
    if args.run_report:
        raise ValueError(
            "--run-report is the default generation's parity report; a "
            "generation's evidence is `candlefire generation compare NAME`"
        )
    from candlefire_pipeline.operations.serving.generation import promote_generation

    outcome = promote_generation(settings, args.generation, _order(args), args.backend)
    return _told("promote", outcome)


def cmd_retire(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.retirement.commands import retire

    done = retire(settings, args.store, _order(args), args.delete_files, say=print)
    code = _told("retire", done.outcome)
    if args.delete_files and code == 0 and done.export is None:
        print(f"candlefire retire: {args.store} is not retired: its files stay", file=sys.stderr)
        return 1
    return code


def cmd_unretire(args: argparse.Namespace, settings: Settings) -> int:
    from candlefire_pipeline.operations.retirement.commands import unretire

    return _told("unretire", unretire(settings, args.store, _order(args), say=print))


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


COMMANDS = {
    "rollback": cmd_rollback,
    "promote": cmd_promote,
    "retire": cmd_retire,
    "unretire": cmd_unretire,
}


def _switch_verb(add, verb: str, help_text: str, store_help: str | None = None):
    """A verb that moves the switch: why (--reason) and who (--by), and the store it names."""
    parser = add(verb, help=help_text)
    if store_help:
        parser.add_argument("store", choices=STORE_NAMES, help=store_help)
    parser.add_argument("--reason", required=True, help="why (recorded in the history)")
    parser.add_argument("--by", default=None, help="who (default: the login name)")
    return parser


def add_parser(add) -> None:
    """The switch's verbs (`add` makes a verb that takes the common options)."""
    _switch_verb(
        add,
        "rollback",
        "return at once to the previous (backend, generation) and pin it (Chroma from the "
        "default generation; no Postgres needed)",
    )
    promote = _switch_verb(
        add, "promote", "serve from pgvector on a passing report (the only way out of a pin)"
    )
    promote.add_argument(
        "--run-report", action="store_true", help="run a new parity report first and use it"
    )
    promote.add_argument(
        "--generation",
        help="serve this index generation, on its latest `generation compare` with what serves",
    )
    promote.add_argument(
        "--backend",
        choices=SERVABLE_STORES,
        default=CANDIDATE,
        help="with --generation: where it serves from (a generation is promoted to pgvector)",
    )
    retire = _switch_verb(
        add,
        "retire",
        "stop writing chroma once pgvector has served the default generation through the "
        "soak (CANDLEFIRE_RETIRE_SOAK_DAYS) on passing evidence",
        "the store to retire (chroma)",
    )
    retire.add_argument(
        "--delete-files",
        action="store_true",
        help="once retired: export its ledger state to data/retired/, then delete its files",
    )
    _switch_verb(
        add,
        "unretire",
        "rebuild a retired store from the ledger's batch files, check it, and make it a "
        "rollback target again",
        "the retired store (chroma)",
    )
