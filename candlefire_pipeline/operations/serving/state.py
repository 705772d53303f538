"""The serving switch's data: its states, what the app reads from serving_backend.json, and the
evidence the transition guards look at (operations/serving/machine.py holds the table).

The switch points at a (backend, generation). A file from before generations has no
`generation` (it serves the default one) and no `previous` (its rollback target is Chroma). It
also says which store is retired (`retired`: no longer written, so a rollback cannot end on it):
the table's rows are the states, each also with Chroma retired where pgvector serves.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from candlefire_pipeline.backends.pg.wal import is_lsn
from candlefire_pipeline.generations.identity import DEFAULT_NAME
from candlefire_pipeline.operations.serving.proofs import Rebuilt, Soak
from candlefire_pipeline.stores import CANDIDATE, REFERENCE, RETIRABLE_STORES, SERVABLE_STORES

if TYPE_CHECKING:  # an annotation only: the app reads the switch without the parity code
    from candlefire_pipeline.parity.gate_result import GateResult

# states ------------------------------------------------------------------------------------
INITIAL = "chroma"  # never promoted: candle-fire serves from Chroma, as it does today
PROMOTED = "pgvector"  # promoted on a report that passed every gate
#: still promoted, but a fresh window of evidence (a parity report, a shadow window) failed a gate
DEGRADED = "pgvector_degraded"
PINNED = "chroma_pinned"  # an operator (or the auto-rollback) rolled back: Chroma until `promote`
#: rolled back (by an operator or the auto-rollback) from a generation to the pgvector target it
#: was promoted over
PINNED_PGVECTOR = "pgvector_pinned"
BACKEND_OF = {INITIAL: REFERENCE, PROMOTED: CANDIDATE, DEGRADED: CANDIDATE, PINNED: REFERENCE,
              PINNED_PGVECTOR: CANDIDATE}  # fmt: skip
PINNED_STATES = (PINNED, PINNED_PGVECTOR)
#: Consecutive failing windows kept per source (the auto-rollback setting allows at most this).
MAX_COUNTED_WINDOWS = 100

# rows of the transition table: a state, and where pgvector serves, the state with Chroma retired
RETIRED_SUFFIX = f"+{REFERENCE}_retired"
PROMOTED_RETIRED = PROMOTED + RETIRED_SUFFIX
DEGRADED_RETIRED = DEGRADED + RETIRED_SUFFIX
PINNED_PGVECTOR_RETIRED = PINNED_PGVECTOR + RETIRED_SUFFIX
RETIRED_ROWS = (PROMOTED_RETIRED, DEGRADED_RETIRED, PINNED_PGVECTOR_RETIRED)
ROWS = (*BACKEND_OF, *RETIRED_ROWS)


def split_row(row: str) -> tuple[str, bool]:
    """(state, whether Chroma is retired) of a row of the table."""
    if row not in ROWS:
        raise ValueError(f"unknown row of the serving table {row!r}; expected one of {ROWS}")
    return row.removesuffix(RETIRED_SUFFIX), row.endswith(RETIRED_SUFFIX)


@dataclass(frozen=True)
class Retirement:
    """A store no longer written (operations/retirement): since when, the report it was retired
    on, and the reference's store-side p95 in that report (the p95 gate's baseline afterwards)."""

    since: str
    report_id: str | None = None
    reference_p95_ms: float | None = None

    @classmethod
    def of(cls, store: str, data) -> Retirement:
        if store not in RETIRABLE_STORES:
            raise ValueError(f"'retired' names {store!r}: only {RETIRABLE_STORES} can be retired")
        if not isinstance(data, dict) or not data.get("since"):
            raise ValueError(f"'retired' must record since when {store} is retired, got {data!r}")
        return cls(data["since"], data.get("report_id"), data.get("reference_p95_ms"))

    def describe(self, store: str) -> str:
        return f"{store} retired since {self.since}" + (
            f" (report {self.report_id})" if self.report_id else ""
        )


@dataclass(frozen=True)
class Target:
    """What serves: a backend and the index generation read on it."""

    backend: str = REFERENCE
    generation: str = DEFAULT_NAME

    def __str__(self) -> str:
        return f"{self.backend}/{self.generation}"

    @classmethod
    def of(cls, data: dict | None) -> Target | None:
        if not data:
            return None
        if not isinstance(data, dict) or data.get("backend") not in SERVABLE_STORES:
            raise ValueError(f"'previous' must name a servable backend, got {data!r}")
        return cls(data["backend"], data.get("generation") or DEFAULT_NAME)


#: Where every rollback ends when nothing else is recorded: the default generation on Chroma.
FLOOR = Target()


@dataclass(frozen=True)
class ServingState:
    state: str = INITIAL
    changed_at: str | None = None  # UTC ISO 8601 of the last change
    report_id: str | None = None  # the report (or comparison) promoted on (or left, for a pin)
    reason: str = "initial: candle-fire serves from Chroma"
    actor: str | None = None  # who: an operator's name, or the Dagster asset
    event: str | None = None
    #: source -> ids of its consecutive failing windows, oldest first (only while DEGRADED)
    failing: dict[str, list[str]] = field(default_factory=dict)
    generation: str = DEFAULT_NAME  # the index generation served on `backend`
    previous: Target | None = None  # what a rollback returns to (None: Chroma, default)
    #: store -> its retirement (only the reference can be retired, only while pgvector serves)
    retired: dict[str, Retirement] = field(default_factory=dict)
    #: the primary's WAL position (LSN) when the switch last changed: a reader on a replica moves
    #: to the new target once it has replayed that far (None: not recorded, e.g. Postgres down)
    wal_lsn: str | None = None
    #: the primary's WAL position when a drop was last applied while pgvector served
    applied_lsn: str | None = None

    @property
    def backend(self) -> str:
        return BACKEND_OF[self.state]

    @property
    def row(self) -> str:
        """The state's row of the transition table (with Chroma retired, its own rows)."""
        return self.state + (RETIRED_SUFFIX if REFERENCE in self.retired else "")

    @property
    def reference_retired(self) -> Retirement | None:
        return self.retired.get(REFERENCE)

    @property
    def target(self) -> Target:
        return Target(self.backend, self.generation)

    @property
    def pinned(self) -> bool:
        return self.state in PINNED_STATES

    @property
    def rollback_target(self) -> Target:
        """The default generation rolls back to Chroma, as before generations; any other one to
        the target it was promoted from."""
        if self.generation == DEFAULT_NAME or self.previous is None:
            return FLOOR
        return self.previous

    def way_back(self) -> str:
        """What a rollback does from here, as an operator reads it in a warning."""
        target, retired = self.rollback_target, self.reference_retired
        if retired is not None and target.backend == REFERENCE:
            return (
                f"a rollback has nowhere to go ({retired.describe(REFERENCE)}): `candlefire "
                f'unretire {REFERENCE} --reason "..."`, then `candlefire rollback`'
            )
        return f"`candlefire rollback --reason ...` returns to {target}, pinned"

    @property
    def degraded(self) -> bool:
        return self.state == DEGRADED

    def to_json(self) -> str:
        return json.dumps({"backend": self.backend, **asdict(self)}, indent=2) + "\n"

    def _on(self) -> str:
        """`pgvector`, or `pgvector/NAME` when a generation other than the default serves."""
        return self.backend if self.generation == DEFAULT_NAME else str(self.target)

    def describe(self) -> str:
        retired = self.reference_retired
        said = self._describe_state()
        if retired is None:
            return said
        return f"{said}; {retired.describe(REFERENCE)}, not written"

    def _describe_state(self) -> str:
        if self.state == INITIAL:
            return "chroma (never promoted)"
        if self.state == PROMOTED:
            return f"{self._on()} (promoted on report {self.report_id} at {self.changed_at})"
        if self.state == DEGRADED:
            windows = "; ".join(
                f"{source}: {len(ids)} in a row ({', '.join(ids[-3:])})"
                for source, ids in sorted(self.failing.items())
            )
            return (
                f"{self._on()} DEGRADED since {self.changed_at} (promoted on report "
                f"{self.report_id}; failing windows: {windows or 'none recorded'})"
            )
        return f"{self._on()} (PINNED by {self.actor} at {self.changed_at}: {self.reason})"


@dataclass(frozen=True)
class Window:
    """One fresh window of evidence judged by the gates while serving: a parity report or a
    shadow window. `failed` names the gates it failed (empty: it passed)."""

    source: str
    window_id: str
    failed: tuple[str, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class Evidence:
    """What the guards look at: the latest report and its gates, evaluated now; for a window
    event, the window and the auto-rollback policy (None: off; N: pin after N in a row). For a
    generation's promotion: the target asked for, whether that generation is live, and the
    (reference, candidate) its latest comparison was made between. To retire Chroma: the
    soak and the reference's p95 in the report; to unretire it: the rebuild's proof."""

    report_id: str | None = None
    started_at: str | None = None
    gates: tuple[GateResult, ...] = ()
    window: Window | None = None
    rollback_after: int | None = None
    wanted: Target | None = None
    wanted_state: str | None = None  # the generation's registry state (live, dropped ...)
    compared: tuple[Target, Target] | None = None
    soak: Soak | None = None
    reference_p95_ms: float | None = None
    rebuilt: Rebuilt | None = None

    @classmethod
    def of(cls, report, gates) -> Evidence:
        if report is None:
            return cls()
        return cls(report.report_id, report.started_at or None, tuple(gates))


def read_state(path: Path) -> ServingState:
    """The current switch; the never-promoted state when nothing was ever recorded."""
    if not Path(path).exists():
        return ServingState()
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: the serving switch is not valid JSON ({exc.msg})") from None
    return state_from(data, path)


def state_from(data, path) -> ServingState:
    """The switch a decoded file (or its published copy, `path` naming where) records."""
    if not isinstance(data, dict) or data.get("backend") not in SERVABLE_STORES:
        found = data.get("backend") if isinstance(data, dict) else data
        raise ValueError(f"{path}: unknown serving backend {found!r}")
    state = data.get("state") or _legacy_state(data)
    if state not in BACKEND_OF or BACKEND_OF[state] != data["backend"]:
        raise ValueError(f"{path}: state {state!r} does not serve {data['backend']!r}")
    failing = data.get("failing") or {}
    if not isinstance(failing, dict) or not all(isinstance(v, list) for v in failing.values()):
        raise ValueError(f"{path}: 'failing' must map a source to a list of window ids")
    try:
        previous = Target.of(data.get("previous"))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    generation = data.get("generation") or DEFAULT_NAME
    if BACKEND_OF[state] == REFERENCE and generation != DEFAULT_NAME:
        raise ValueError(f"{path}: Chroma serves the default generation only, not {generation!r}")
    retired = _retired(path, data.get("retired"))
    if retired and BACKEND_OF[state] == REFERENCE:
        raise ValueError(f"{path}: {REFERENCE} serves ({state}) but is recorded as retired")
    for key in ("wal_lsn", "applied_lsn"):
        if data.get(key) is not None and not is_lsn(data[key]):
            raise ValueError(f"{path}: {key!r} is not a WAL position: {data[key]!r}")
    fields = {k: data.get(k) for k in ServingState.__dataclass_fields__ if k in data}
    return ServingState(**{**fields, "state": state, "failing": failing, "generation": generation,
                           "previous": previous, "retired": retired})  # fmt: skip


def salvaged_retirement(path: Path) -> dict[str, Retirement]:
    """The retirement an unreadable switch file still records, if any (never raises): the
    fallbacks that assume Chroma (a rollback over a broken file, the reader) must not land on a
    retired store."""
    try:
        data = json.loads(Path(path).read_text())
        return _retired(path, data.get("retired"))
    except (OSError, ValueError, AttributeError):
        return {}


def _retired(path: Path, data) -> dict[str, Retirement]:
    if not data:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: 'retired' must map a store to its retirement, got {data!r}")
    try:
        return {store: Retirement.of(store, found) for store, found in data.items()}
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def _legacy_state(data: dict) -> str:
    """A file from before the state machine: pgvector was a promotion; a recorded Chroma change
    was an operator's rollback, so it stays a pin."""
    if data["backend"] == CANDIDATE:
        return PROMOTED
    return PINNED if data.get("changed_at") else INITIAL
