"""The serving switch's transition table: (row, event) -> the rule(s) that decide it.

A row is a state (operations/serving/state.py) or, where pgvector serves, the same state with
Chroma retired: there a rollback cannot end on Chroma, so it is refused with the command that
restores it, and an auto-rollback that would go there leaves the switch degraded instead.
machine.py applies the table; docs/OPERATIONS.md's table is this one written out.
"""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.operations.serving.guards import (
    ALL_CLEAR,
    BACK_TO_PGVECTOR,
    DEFAULT_SERVES,
    GATES_PASS,
    GENERATION_GUARDS,
    NEWER_THAN_PIN,
    REBUILT,
    RETIRE_GUARDS,
    ROLLBACK_DUE,
    SOURCE_CLEAR,
    WINDOW_COUNTED,
)
from candlefire_pipeline.operations.serving.state import (
    DEGRADED,
    DEGRADED_RETIRED,
    INITIAL,
    PINNED,
    PINNED_PGVECTOR,
    PINNED_PGVECTOR_RETIRED,
    PROMOTED,
    PROMOTED_RETIRED,
)

# events -------------------------------------------------------------------------
AUTO_PROMOTE = "auto_promote"  # the serving_backend asset (schedule, sensor, re-run)
PROMOTE = "promote"  # `candlefire promote --reason`
ROLLBACK = "rollback"  # `candlefire rollback --reason`
PROMOTE_GENERATION = "promote_generation"  # `candlefire promote --generation NAME --reason`
#: a fresh window of evidence while serving (parity_report, shadow_parity) failed / passed
WINDOW_FAILED = "window_failed"
WINDOW_PASSED = "window_passed"
WINDOW_EVENTS = (WINDOW_FAILED, WINDOW_PASSED)
RETIRE = "retire"  # `candlefire retire chroma --reason`: stop writing it, on the soak's evidence
UNRETIRE = "unretire"  # `candlefire unretire chroma --reason`: rebuilt and checked, a target again
EVENTS = (AUTO_PROMOTE, PROMOTE, ROLLBACK, *WINDOW_EVENTS, PROMOTE_GENERATION, RETIRE, UNRETIRE)
NOT_WATCHED = "not serving pgvector: a window changes nothing"
PIN_NOT_WATCHED = "pinned by an operator: a window changes nothing"


@dataclass(frozen=True)
class Rule:
    """target None: the event changes nothing; `refused` says whether that is a refusal (an
    operator gets a non-zero exit) or simply nothing to do. `why` may name {source} and {count}
    (the window's source and its failing windows in a row, this one included), {since} (when
    Chroma was retired), {changed_at} and {actor} (the state's last change), {soak} (its days)
    and {rebuilt} (what an unretire rebuilt)."""

    target: str | None
    guards: tuple[str, ...] = ()
    refused: bool = False
    why: str = ""


#: Every rollback: back to the pgvector target it came from when that is where it returns
#: (a generation promoted over another pgvector one), else Chroma.
_ROLLBACK = (Rule(PINNED_PGVECTOR, (BACK_TO_PGVECTOR,)), Rule(PINNED))
_AUTO_ROLLBACK = "auto-rollback after {count} failing {source} windows"
#: N failing windows in a row with auto-rollback on: where a rollback goes, pinned.
_AUTO = (Rule(PINNED_PGVECTOR, (ROLLBACK_DUE, BACK_TO_PGVECTOR), why=_AUTO_ROLLBACK),
         Rule(PINNED, (ROLLBACK_DUE,), why=_AUTO_ROLLBACK))  # fmt: skip
_PINNED_AUTO = Rule(
    None,
    refused=True,
    why="pinned (by an operator or the auto-rollback): only `candlefire promote` leaves a pin",
)
_ANOTHER_GENERATION = Rule(
    None,
    refused=True,
    why="another generation serves: `candlefire promote --generation default` returns to the "
    "default one",
)


#: (row, event) -> rule, or rules tried in order
Rows = dict[tuple[str, str], Rule | tuple[Rule, ...]]


def _degraded(degraded: str, promoted: str, rollback, auto) -> Rows:
    """A degraded state's rows, the same with and without Chroma but for where they lead:
    `promoted`, the `rollback` rules and the `auto`-rollback ones."""
    return {
        (degraded, AUTO_PROMOTE): Rule(None, why="already serving pgvector (degraded)"),
        # an operator who has looked re-arms the watch, on a report passing every gate
        (degraded, PROMOTE): Rule(promoted, (DEFAULT_SERVES, GATES_PASS)),
        (degraded, ROLLBACK): rollback,
        # a window counts once; then the auto-rollback, or the count grows
        (degraded, WINDOW_FAILED): (
            Rule(None, (WINDOW_COUNTED,), why="this window was already counted"),
            *auto,
            Rule(degraded, why="still degraded: {count} failing {source} windows in a row"),
        ),
        # a passing window clears its source; promoted once no source fails
        (degraded, WINDOW_PASSED): (
            Rule(None, (SOURCE_CLEAR,), why="no failing {source} window to clear"),
            Rule(promoted, (ALL_CLEAR,), why="recovered: a {source} window passed"),
            Rule(degraded, why="still degraded: {source} recovered, another source still fails"),
        ),
        (degraded, PROMOTE_GENERATION): Rule(promoted, GENERATION_GUARDS),
    }


# retiring Chroma ------------------------------------------------------------------------------
_RESTORE = (
    "chroma is retired (since {since}): a rollback has nowhere to go. Run `candlefire unretire "
    'chroma --reason "..."` (rebuilds it from the ledger and checks it), then `candlefire '
    'rollback --reason "..."`'
)
_ROLLBACK_RETIRED = (Rule(PINNED_PGVECTOR_RETIRED, (BACK_TO_PGVECTOR,)),
                     Rule(None, refused=True, why=_RESTORE))  # fmt: skip
_AUTO_RETIRED = (
    Rule(PINNED_PGVECTOR_RETIRED, (ROLLBACK_DUE, BACK_TO_PGVECTOR), why=_AUTO_ROLLBACK),
    Rule(DEGRADED_RETIRED, (ROLLBACK_DUE,), why="degraded: auto-rollback due after {count} "
         "failing {source} windows, but chroma is retired (since {since}); `candlefire unretire "
         "chroma` restores a rollback target"),
)  # fmt: skip
_SOAK_NEEDS = "retiring chroma needs pgvector serving the default generation through a {soak}-day "
_RETIRE_REFUSED = {
    INITIAL: "chroma serves (never promoted): " + _SOAK_NEEDS + "soak first",
    PINNED: "pinned to chroma by {actor} since {changed_at}: " + _SOAK_NEEDS + "soak, unpinned",
    PINNED_PGVECTOR: "pinned by {actor} since {changed_at}: " + _SOAK_NEEDS + "soak, unpinned",
    DEGRADED: "degraded since {changed_at} (a watched window failed): " + _SOAK_NEEDS
    + "soak with every watched window passing",
}  # fmt: skip
_ALREADY_RETIRED = Rule(None, why="chroma is retired already (since {since})")
_NOT_RETIRED = Rule(None, why="chroma is not retired: nothing to restore")
_UNRETIRED = "{rebuilt}: a rollback target again"

#: (row, event) -> rule, or rules tried in order (the first whose guards all pass applies;
#: when none does, the event is refused with every guard's reason). Every pair is listed;
#: tests walk this table.
TRANSITIONS: Rows = {
    (INITIAL, AUTO_PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, PROMOTE): Rule(PROMOTED, (GATES_PASS,)),
    (INITIAL, ROLLBACK): Rule(PINNED),
    (INITIAL, WINDOW_FAILED): Rule(None, why=NOT_WATCHED),
    (INITIAL, WINDOW_PASSED): Rule(None, why=NOT_WATCHED),
    (INITIAL, PROMOTE_GENERATION): Rule(PROMOTED, GENERATION_GUARDS),
    (PROMOTED, AUTO_PROMOTE): Rule(None, why="already serving pgvector"),
    (PROMOTED, PROMOTE): (
        Rule(None, (DEFAULT_SERVES,), why="already serving pgvector"),
        _ANOTHER_GENERATION,
    ),
    (PROMOTED, ROLLBACK): _ROLLBACK,
    (PROMOTED, WINDOW_FAILED): (*_AUTO, Rule(DEGRADED, why="degraded: a {source} window failed")),
    (PROMOTED, WINDOW_PASSED): Rule(None, why="healthy: nothing to clear"),
    (PROMOTED, PROMOTE_GENERATION): Rule(PROMOTED, GENERATION_GUARDS),
    **_degraded(DEGRADED, PROMOTED, _ROLLBACK, _AUTO),
    (PINNED, AUTO_PROMOTE): _PINNED_AUTO,
    (PINNED, PROMOTE): Rule(PROMOTED, (GATES_PASS, NEWER_THAN_PIN)),
    (PINNED, ROLLBACK): Rule(PINNED),  # a new pin replaces the old one (new reason, new time)
    (PINNED, WINDOW_FAILED): Rule(None, why=NOT_WATCHED),
    (PINNED, WINDOW_PASSED): Rule(None, why=NOT_WATCHED),
    (PINNED, PROMOTE_GENERATION): Rule(PROMOTED, (*GENERATION_GUARDS, NEWER_THAN_PIN)),
    (PINNED_PGVECTOR, AUTO_PROMOTE): _PINNED_AUTO,
    (PINNED_PGVECTOR, PROMOTE): Rule(PROMOTED, (DEFAULT_SERVES, GATES_PASS, NEWER_THAN_PIN)),
    (PINNED_PGVECTOR, ROLLBACK): _ROLLBACK,
    (PINNED_PGVECTOR, WINDOW_FAILED): Rule(None, why=PIN_NOT_WATCHED),
    (PINNED_PGVECTOR, WINDOW_PASSED): Rule(None, why=PIN_NOT_WATCHED),
    (PINNED_PGVECTOR, PROMOTE_GENERATION): Rule(PROMOTED, (*GENERATION_GUARDS, NEWER_THAN_PIN)),
    # retiring Chroma: only from the promoted state, on the soak's evidence
    **{(row, RETIRE): Rule(None, refused=True, why=why) for row, why in _RETIRE_REFUSED.items()},
    (PROMOTED, RETIRE): Rule(PROMOTED_RETIRED, RETIRE_GUARDS),
    **{
        (row, UNRETIRE): _NOT_RETIRED
        for row in (INITIAL, PROMOTED, DEGRADED, PINNED, PINNED_PGVECTOR)
    },
    # with Chroma retired: the same as without, but no way ends on Chroma until it is restored
    (PROMOTED_RETIRED, AUTO_PROMOTE): Rule(None, why="already serving pgvector"),
    (PROMOTED_RETIRED, PROMOTE): (
        Rule(None, (DEFAULT_SERVES,), why="already serving pgvector"),
        _ANOTHER_GENERATION,
    ),
    (PROMOTED_RETIRED, ROLLBACK): _ROLLBACK_RETIRED,
    (PROMOTED_RETIRED, WINDOW_FAILED): (
        *_AUTO_RETIRED,
        Rule(DEGRADED_RETIRED, why="degraded: a {source} window failed"),
    ),
    (PROMOTED_RETIRED, WINDOW_PASSED): Rule(None, why="healthy: nothing to clear"),
    (PROMOTED_RETIRED, PROMOTE_GENERATION): Rule(PROMOTED_RETIRED, GENERATION_GUARDS),
    (PROMOTED_RETIRED, RETIRE): _ALREADY_RETIRED,
    (PROMOTED_RETIRED, UNRETIRE): Rule(PROMOTED, (REBUILT,), why=_UNRETIRED),
    **_degraded(DEGRADED_RETIRED, PROMOTED_RETIRED, _ROLLBACK_RETIRED, _AUTO_RETIRED),
    (DEGRADED_RETIRED, RETIRE): _ALREADY_RETIRED,
    (DEGRADED_RETIRED, UNRETIRE): Rule(DEGRADED, (REBUILT,), why=_UNRETIRED),
    (PINNED_PGVECTOR_RETIRED, AUTO_PROMOTE): _PINNED_AUTO,
    (PINNED_PGVECTOR_RETIRED, PROMOTE): Rule(
        PROMOTED_RETIRED, (DEFAULT_SERVES, GATES_PASS, NEWER_THAN_PIN)
    ),
    (PINNED_PGVECTOR_RETIRED, ROLLBACK): _ROLLBACK_RETIRED,
    (PINNED_PGVECTOR_RETIRED, WINDOW_FAILED): Rule(None, why=PIN_NOT_WATCHED),
    (PINNED_PGVECTOR_RETIRED, WINDOW_PASSED): Rule(None, why=PIN_NOT_WATCHED),
    (PINNED_PGVECTOR_RETIRED, PROMOTE_GENERATION): Rule(
        PROMOTED_RETIRED, (*GENERATION_GUARDS, NEWER_THAN_PIN)
    ),
    (PINNED_PGVECTOR_RETIRED, RETIRE): _ALREADY_RETIRED,
    (PINNED_PGVECTOR_RETIRED, UNRETIRE): Rule(PINNED_PGVECTOR, (REBUILT,), why=_UNRETIRED),
}
