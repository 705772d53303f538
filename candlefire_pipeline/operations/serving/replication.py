"""Reads from a streaming replica: what the switch recorded against what the replica replayed.

The switch records the primary's WAL position (LSN) with each change (`wal_lsn`: a promotion,
a rollback, a retirement ...) and with each drop applied to pgvector while it serves
(`applied_lsn`). A reader on a replica (CANDLEFIRE_PG_READ_DSN) moves to a new pgvector target
only once the replica has replayed `wal_lsn`: until then a running reader keeps serving the
target it served (the previous state, which the replica holds), and a reader with nothing
served yet waits up to CANDLEFIRE_REPLICA_WAIT_SECONDS, then refuses with one line. A drop
needs no gate: the replica shows the store as it was before the drop until it replays it (the
previous state, consistent per transaction). Chroma is not on the replica: a move to it is
never held back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

import psycopg

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.connect import connect
from candlefire_pipeline.backends.pg.wal import Replay, primary_lsn, replay_position
from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.operations.serving.machine import switch_lock
from candlefire_pipeline.operations.serving.state import ServingState, Target, read_state
from candlefire_pipeline.redact import redact_dsn
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.settings.replica import ReplicaSettings
from candlefire_pipeline.stores import CANDIDATE

log = logging.getLogger(__name__)

#: Seconds between two looks at the replay position while a new reader waits.
POLL_SECONDS = 0.1


class ReplicaBehindError(BackendUnavailableError):
    """A reader with nothing served yet and a replica that has not replayed the switch's change
    (or cannot say: down, or without the reader's role yet)."""


class ReplicaGate:
    """The read replica's replay position, asked only when the switch names a new target."""

    def __init__(self, replica: ReplicaSettings) -> None:
        self._dsn, self.wait_seconds = replica.read_dsn, replica.wait_seconds
        self._conn: psycopg.Connection | None = None
        #: the WAL position a running reader is holding back for (None: it follows the switch)
        self.waiting_for: str | None = None

    def replay(self) -> Replay:
        """One round trip; a replica that does not answer raises BackendUnavailableError."""
        try:
            if self._conn is None or self._conn.closed:
                self._conn = connect(self._dsn, timeout=5)  # its errors never hold the password
            return replay_position(self._conn)
        except BackendUnavailableError as exc:
            self.close()
            raise BackendUnavailableError(_first_line(exc)) from None
        except psycopg.Error as exc:
            self.close()
            raise BackendUnavailableError(
                f"the read replica at {redact_dsn(self._dsn)} does not answer: {type(exc).__name__}"
            ) from None

    def ready_for(self, state: ServingState, wanted: Target, served: bool) -> bool:
        """Whether the replica holds what `state` serves (`served`: the reader serves something
        it may keep); a reader with nothing served waits, bounded, then refuses."""
        if wanted.backend != CANDIDATE or state.wal_lsn is None:
            return True
        if self._replayed(state.wal_lsn) is True:
            self.waiting_for = None
            return True
        if served:
            if self.waiting_for != state.wal_lsn:
                log.warning(
                    "the read replica has not replayed %s (the switch's move to %s): serving "
                    "the previous state until it has", state.wal_lsn, wanted,
                )  # fmt: skip
            self.waiting_for = state.wal_lsn
            return False
        return self._waited(state.wal_lsn, wanted)

    def _replayed(self, lsn: str) -> bool | str:
        """True when the replica has replayed `lsn`; False, or why it cannot say (a replica
        down, or one that has not replayed the reader's role yet: it lacks the change too)."""
        try:
            return self.replay().has_replayed(lsn)
        except BackendUnavailableError as exc:
            return str(exc)

    def _waited(self, lsn: str, wanted: Target) -> bool:
        deadline = time.monotonic() + self.wait_seconds
        while (found := self._replayed(lsn)) is not True and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        if found is True:
            return True
        why = f": {found}" if found else ""
        raise ReplicaBehindError(
            f"the read replica has not replayed the switch's move to {wanted} (WAL {lsn}) "
            f"within {self.wait_seconds:g} s (CANDLEFIRE_REPLICA_WAIT_SECONDS){why}; "
            "`candlefire replica status` shows its lag"
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None


def _first_line(exc: Exception) -> str:
    return str(exc).strip().splitlines()[0]


def note_applied_drop(settings: Settings, dsn: str | None) -> str | None:
    """Record the primary's WAL position after a drop's apply in the switch, while pgvector
    serves (how far a replica must replay to show it); the position, or None if not recorded."""
    lsn = primary_lsn(dsn)
    if lsn is None:
        return None
    with switch_lock(settings):
        try:
            state = read_state(settings.serving_file)
        except ValueError as exc:  # a broken switch is the reader's and the operator's to see
            log.warning("drop's WAL position not recorded: %s", exc)
            return None
        if state.backend != CANDIDATE:
            return None
        write_atomic(settings.serving_file, replace(state, applied_lsn=lsn).to_json())
    return lsn
