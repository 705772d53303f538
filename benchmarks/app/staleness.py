"""How long after a writer's commit the app can still read the previous content, measured.

A table of its own (the first SMALL_ROWS chunks of the corpus, so the measured table stays as
built) is read by a collection across the copy-on arm's delay proxy, at each RTT. The collection
serves one call over and over (a paper's chunks by `get`, every POLL_S), so its process copy holds
the answer; the benchmark then commits a drop re-publishing that paper with a new marker in its
text, from a writer process of its own through a direct connection (the pipeline's writer, on
the server's side: `replace_papers`, whose commit moves the content version and notifies the
table's change channel; staleness_writer.py), while the collection goes on serving. The commit
is stamped when its notification reaches a listener on a direct local connection
(replace_papers itself returns a few statements after its commit); the window is from that
stamp to the first answer holding the marker. Arms: the copy on
(the default: the notification arrives, the copy is dropped, the next call asks Postgres), the
copy on with notifications lost (the watch's handler drops them: only its heartbeat, every third
of CANDLEFIRE_APP_STALENESS_MS, moves it; the bound holds even if the heartbeat fails too), and
the copy off (every call asks).
"""

from __future__ import annotations

import logging
import random
import statistics
import time
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.app.network import COPY_ON, Across, store_of
from benchmarks.app.staleness_writer import GIVE_UP_S, WriterProcess
from benchmarks.common.stores import load, open_store
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.settings import AppClientSettings

log = logging.getLogger(__name__)

SMALL_ROWS = 2_000
POLL_S = 0.001
ON, LOST, OFF = "copy on", "copy on, notifications lost", "copy off"
KINDS = (ON, LOST, OFF)


@dataclass
class Windows:
    """One arm's windows at one RTT, in seconds, and the stale answers served inside them."""

    rtt: float
    kind: str
    seconds: list[float] = field(default_factory=list)
    stale: list[int] = field(default_factory=list)

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1e3

    @property
    def max_ms(self) -> float:
        return max(self.seconds) * 1e3


def small_table(dsn: str, corpus, label: str) -> pa.Table:
    """The table `label` holding the corpus's first SMALL_ROWS chunks (built once); the rows of
    the paper the commits re-publish."""
    rows = next(corpus.slices(rows=SMALL_ROWS))
    store = open_store("pgvector", dsn, label)
    try:
        load(store, rows, corpus.model_id, corpus.dim)
    finally:
        store.close()
    first = rows["pmid"][0].as_py()
    return rows.filter(pc.equal(rows["pmid"], first))


def measure(net: Across, embedder, label: str, paper: pa.Table, rtts: list[float],
            commits: int) -> list[Windows]:  # fmt: skip
    """Every arm's windows at every RTT, `commits` commits each."""
    writer = WriterProcess(net.dsn, label, paper)
    on = replace(net.settings[COPY_ON], pg_table=label)
    off = replace(on, app_client=AppClientSettings(staleness_ms=0))
    out = []
    try:
        for rtt in rtts:
            net.set_rtt(rtt)
            for kind in KINDS:
                windows = Windows(rtt, kind)
                with open_collection(off if kind == OFF else on, embedder) as collection:
                    _serve(collection, writer, paper, windows, commits)
                out.append(windows)
                log.info("staleness at %g ms, %s: median %.1f ms, max %.1f ms", rtt, kind,
                         windows.median_ms, windows.max_ms)  # fmt: skip
    finally:
        writer.close()
    return out


def _serve(collection, writer: WriterProcess, paper: pa.Table, windows: Windows,
           commits: int) -> None:  # fmt: skip
    pmid = paper["pmid"][0].as_py()

    def ask() -> list[str]:
        return collection.get(where={"pmid": {"$eq": pmid}}, include=["documents"])["documents"]

    ask()
    store = store_of(collection)
    if store.watch is not None:
        _proven(store)
        if windows.kind == LOST:
            store.watch._notified = lambda payload: None  # notifications lost on arrival
    pauses = random.Random(commits)
    for k in range(commits):
        marker = f"[probe {windows.rtt:g} ms {windows.kind} {k}]"
        ask()  # the old answer in the copy (with the copy on), then served from it
        time.sleep(pauses.uniform(0.05, 0.4))  # at another point of the heartbeat each time
        ask()
        writer.start(marker)
        answers = []  # (when it returned, whether it held the new text), serving meanwhile
        started = time.monotonic()
        while not (answers and answers[-1][1]):
            new = any(marker in text for text in ask())
            answers.append((time.monotonic(), new))
            if answers[-1][0] - started > GIVE_UP_S:
                raise RuntimeError(f"{windows.kind}: the commit never showed")
            time.sleep(POLL_S)
        committed = writer.committed()
        windows.seconds.append(answers[-1][0] - committed)
        windows.stale.append(sum(1 for at, new in answers if at > committed and not new))


def _proven(store) -> None:
    deadline = time.monotonic() + GIVE_UP_S
    while store.watch.current() is None:
        if time.monotonic() > deadline:
            raise RuntimeError("the change watch never read the version")
        time.sleep(0.005)
