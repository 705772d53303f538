"""The serving switch published in Postgres, for an app that has the DSN and not the switch file.

A Space reads a managed Postgres across a network and shares no disk with the pipeline: the
pipeline copies the switch (and the records of the generations it names) into the table
`serving_switch` whenever it writes the switch's history, one row per deployment (keyed by its
default generation's table, CANDLEFIRE_PG_TABLE: one database may hold several). An app without
the file follows that copy, read again at most every CANDLEFIRE_SWITCH_POLL_MS (docs/APP.md,
"The switch on a Space"). A copy never replaces one published from a later change.
"""

from __future__ import annotations

import json
import logging
import threading
import time

import psycopg
from psycopg.types.json import Jsonb

from candlefire_pipeline.backends.common import BackendUnavailableError
from candlefire_pipeline.backends.pg.connect import connect, one_line
from candlefire_pipeline.generations.identity import DEFAULT_NAME, Generation
from candlefire_pipeline.operations.serving.state import ServingState, read_state, state_from
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.settings.app_client import AppClientSettings

log = logging.getLogger(__name__)

TABLE = "serving_switch"
WHERE = "the serving switch published in Postgres (serving_switch)"
DDL = f"""CREATE TABLE IF NOT EXISTS {TABLE} (
    pg_table     text PRIMARY KEY,
    switch       jsonb NOT NULL,
    generations  jsonb NOT NULL DEFAULT '[]',
    changed_at   timestamptz,
    published_at timestamptz NOT NULL DEFAULT clock_timestamp()
)"""
# a copy made from an older change (a slower process publishing late) never replaces a newer
# one; the same copy again writes nothing (the apps read it again only when it changed)
UPSERT = f"""INSERT INTO {TABLE} (pg_table, switch, generations, changed_at)
VALUES (%s, %s, %s, %s)
ON CONFLICT (pg_table) DO UPDATE SET switch = EXCLUDED.switch, generations = EXCLUDED.generations,
    changed_at = EXCLUDED.changed_at, published_at = clock_timestamp()
WHERE ({TABLE}.switch, {TABLE}.generations) IS DISTINCT FROM (EXCLUDED.switch, EXCLUDED.generations)
    AND ({TABLE}.changed_at IS NULL OR EXCLUDED.changed_at IS NULL
         OR EXCLUDED.changed_at >= {TABLE}.changed_at)"""


def publish_switch(settings: Settings, dsn: str | None) -> bool:
    """Copy the switch file into Postgres; False (and a warning) when there is nothing to copy
    or Postgres does not take it: the next history write tries again."""
    if dsn is None or not settings.serving_file.exists():
        return False
    try:
        state = read_state(settings.serving_file)
        records = _records(settings, state)
        with connect(dsn, timeout=5) as conn:  # its errors never quote the DSN
            conn.execute(DDL)
            conn.execute(UPSERT, (settings.pg_table, Jsonb(_switch_json(state)), Jsonb(records),
                                  state.changed_at))  # fmt: skip
    except (ValueError, psycopg.Error, OSError, BackendUnavailableError) as exc:
        log.warning("the serving switch was not published in Postgres: %s",
                    one_line(str(exc)) or type(exc).__name__)  # fmt: skip
        return False
    return True


def _switch_json(state: ServingState) -> dict:
    return json.loads(state.to_json())


def _records(settings: Settings, state: ServingState) -> list[dict]:
    """The registry's records of the generations the switch names besides the default."""
    names = {t.generation for t in (state.target, state.previous) if t is not None}
    names.discard(DEFAULT_NAME)
    if not names:
        return []
    from candlefire_pipeline.generations.registry import stored_registry

    stored = stored_registry(settings)
    if stored is None:
        raise ValueError(f"the switch names {sorted(names)} and there is no generation registry")
    return [stored.get(name).to_dict() for name in sorted(names)]


class PublishedSwitch:
    """The published switch as an app reads it: one round trip at most every `poll_ms`, taken
    by one thread while the others go on with the copy they have (never waiting on it), except
    before the first answer."""

    def __init__(self, dsn: str, pg_table: str, client: AppClientSettings) -> None:
        self._table = pg_table
        self._dsn = client.client_dsn(dsn, "candlefire-app-switch")
        self._poll_s = client.switch_poll_ms / 1000
        self._polling = threading.Lock()
        self._conn: psycopg.Connection | None = None
        self._row: tuple | None = None  # (switch, generations, published_at); None: none yet
        self._read_at: float | None = None
        self._failing = False

    def signature(self) -> tuple:
        """What changes when the pipeline publishes again (read when a poll is due)."""
        due = self._read_at is None or time.monotonic() - self._read_at >= self._poll_s
        if due and self._polling.acquire(blocking=self._read_at is None):
            try:
                self._poll()
            finally:
                self._polling.release()
        row = self._row
        return ("published", row[2] if row else None)

    def state(self) -> ServingState:
        row = self._row
        if row is None:
            return ServingState()  # never published: the pipeline never promoted
        return state_from(row[0], WHERE)

    def salvaged(self) -> dict:
        try:
            return self.state().retired
        except ValueError:
            return {}

    def generation(self, name: str) -> Generation:
        records = self._row[1] if self._row else []
        for record in records or []:
            if record.get("name") == name:
                return Generation.from_dict(record)
        raise ValueError(f"{WHERE} names generation {name!r} without its record")

    def _poll(self) -> None:
        if self._read_at is not None and time.monotonic() - self._read_at < self._poll_s:
            return  # another thread polled while this one waited for the first answer
        try:
            self._row = self._fetch()
        except (psycopg.Error, BackendUnavailableError) as exc:
            self._drop()
            said = one_line(str(exc)) or type(exc).__name__
            if self._read_at is None:
                raise BackendUnavailableError(
                    f"{WHERE} could not be read: {said}") from None  # fmt: skip
            if not self._failing:
                log.warning("%s could not be read (%s): the last copy read stays", WHERE, said)
            # tried again a poll later: a store that still answers (Chroma) is not slowed down
            self._failing, self._read_at = True, time.monotonic()
            return
        if self._failing:
            log.info("%s is read again", WHERE)
        self._failing, self._read_at = False, time.monotonic()

    def _fetch(self) -> tuple | None:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self._dsn)
        try:
            return self._conn.execute(
                f"SELECT switch, generations, published_at FROM {TABLE} WHERE pg_table = %s",
                [self._table],
            ).fetchone()
        except psycopg.errors.UndefinedTable:
            return None  # never published (autocommit: the connection stays usable)

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._polling:
            self._drop()
