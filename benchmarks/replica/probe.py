"""What runs beside a drop: the lag sampler (the primary's view of its standby) and the app's
reader (the collection on the replica), each in its own thread until stopped."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import psycopg

#: bytes of WAL the standby has not replayed, and Postgres' own replay_lag (0 when idle)
LAG = """
    SELECT (pg_current_wal_lsn() - replay_lsn)::bigint,
           coalesce(extract(epoch FROM replay_lag), 0)::float8
    FROM pg_stat_replication LIMIT 1
"""
PREVIOUS, NEW, TORN, ERROR = "previous", "new", "torn", "error"


class Probe(threading.Thread):
    """A loop run every `every` seconds until stop(); times relative to `origin`."""

    def __init__(self, origin: float, every: float) -> None:
        super().__init__(daemon=True)
        self.origin, self.every, self._stop_event = origin, every, threading.Event()

    def now(self) -> float:
        return time.monotonic() - self.origin

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.once()
            self._stop_event.wait(self.every)

    def once(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


class LagSampler(Probe):
    """(seconds, lag bytes, replay_lag seconds) from the primary's pg_stat_replication."""

    def __init__(self, primary_dsn: str, origin: float, every: float = 0.25) -> None:
        super().__init__(origin, every)
        self.conn = psycopg.connect(primary_dsn, autocommit=True)
        self.samples: list[tuple[float, int, float]] = []

    def once(self) -> None:
        row = self.conn.execute(LAG).fetchone()
        if row is not None and row[0] is not None:
            self.samples.append((self.now(), int(row[0]), float(row[1])))

    def stop(self) -> None:
        super().stop()
        self.conn.close()


@dataclass(frozen=True)
class Answer:
    at: float  # seconds since the phase began, when the request ended
    kind: str  # PREVIOUS | NEW | TORN | ERROR
    ms: float
    detail: str = ""


class AppReader(Probe):
    """The app's calls on the replica, back to back: count(), one query(), and a get() of the
    drop's sample papers (one statement: one snapshot) classed by the drop's marker text."""

    def __init__(self, collection, pmids: list[str], marker: str, text: str, origin: float):
        super().__init__(origin, every=0.0)
        self.collection, self.pmids, self.marker, self.text = collection, pmids, marker, text
        self.answers: list[Answer] = []

    def once(self) -> None:
        started = time.perf_counter()
        try:
            self.collection.count()
            self.collection.query(query_texts=[self.text], n_results=10, include=["documents"])
            got = self.collection.get(where={"pmid": {"$in": self.pmids}}, include=["documents"])
            kind = self._kind(got["documents"])
            detail = ""
        except Exception as exc:  # the figure is what the app would have seen
            kind, detail = ERROR, f"{type(exc).__name__}: {exc}".splitlines()[0]
        ms = (time.perf_counter() - started) * 1e3
        self.answers.append(Answer(self.now(), kind, ms, detail))

    def _kind(self, documents: list[str]) -> str:
        marked = sum(self.marker in d for d in documents)
        if marked == 0:
            return PREVIOUS
        return NEW if marked == len(documents) else TORN
