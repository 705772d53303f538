"""candle-fire's search path through `open_collection()` on pgvector vs the same calls on the real
Chroma collection (as candle-fire ships it: a persisted folder, ef_search 100, its embedding
function embedding each query's texts), and beside them `ServingReader.retrieve` on the same
requests. The collection and the reader are warm (an untimed pass over the name pool and one
over the requests first, as an app that has run a while); Chroma had 3 untimed requests. The
timed requests carry question texts none of the arms has seen (unseen.py; their names and
codes were seen): the collection's process copy would otherwise answer a repeated request
whole, with no round trip.

One process, the three arms interleaved request by request (the order rotating), so drift and
other work on the machine fall on all three alike. The two collection arms' answers are compared
request by request, with an exact pgvector collection (every row ranked) as the referee for
stages whose members differ (agreement.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.app import search_path
from benchmarks.app.agreement import Verdict, verdict
from benchmarks.app.counting import CountingCalls, CountingEmbedder, open_chroma_collection
from benchmarks.app.scaled import exact_settings
from benchmarks.common.requests import Request
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.operations.reader import ServingReader
from candlefire_pipeline.settings import Settings

log = logging.getLogger(__name__)
#: Untimed requests on Chroma first: its connection and the load of its index.
CHROMA_WARMUP = 3
COLLECTION_PG = "open_collection() on pgvector"
CHROMA, READER = "Chroma collection", "ServingReader"
ARMS = (COLLECTION_PG, CHROMA, READER)


@dataclass
class Arm:
    """One way of answering a request, and what it cost per request."""

    name: str
    answer: Callable[[Request], object]
    embedder: CountingEmbedder
    calls: CountingCalls | None = None  # None: one retrieve() per request
    seconds: list[float] = field(default_factory=list)
    embed_seconds: list[float] = field(default_factory=list)
    answers: list = field(default_factory=list)
    call_counts: dict[str, int] = field(default_factory=dict)
    embedder_calls: int = 0
    texts: int = 0
    #: how the serving store answered the timed calls (app/pg_store.py), for the collection
    answered: dict[str, int] = field(default_factory=dict)

    def timed(self, request: Request) -> None:
        calls, texts, spent = self.embedder.calls, self.embedder.texts, self.embedder.seconds
        before = dict(self.calls.calls) if self.calls else {}
        started = time.perf_counter()
        self.answers.append(self.answer(request))
        self.seconds.append(time.perf_counter() - started)
        self.embed_seconds.append(self.embedder.seconds - spent)
        self.embedder_calls += self.embedder.calls - calls
        self.texts += self.embedder.texts - texts
        made = {"retrieve": 1} if self.calls is None else {
            name: n - before.get(name, 0) for name, n in self.calls.calls.items()
        }  # fmt: skip
        for name, n in made.items():
            self.call_counts[name] = self.call_counts.get(name, 0) + n


def rotated(items: tuple, by: int) -> tuple:
    by %= len(items)
    return items[by:] + items[:by]


def search_answer(collection) -> Callable[[Request], search_path.Answer]:
    return lambda r: search_path.answer(collection, r.query, list(r.entities), list(r.terms))


def measure(
    settings: Settings, embedder, warm_pass: list[Request], requests: list[Request],
    chroma: tuple[Path, str], size: int,
) -> tuple[dict[str, Arm], list[Verdict]]:  # fmt: skip
    """Every request on each arm, interleaved, after `warm_pass` (untimed); the collection arms'
    answers compared."""
    counting = {name: CountingEmbedder(embedder) for name in ARMS}
    served = open_collection(settings, counting[COLLECTION_PG])
    client, chroma_collection = open_chroma_collection(*chroma, counting[CHROMA])
    reader = ServingReader(settings, counting[READER])
    referee = open_collection(exact_settings(settings, size), embedder)
    try:
        pg_calls, chroma_calls = CountingCalls(served), CountingCalls(chroma_collection)
        arms = {
            COLLECTION_PG: Arm(COLLECTION_PG, search_answer(pg_calls), counting[COLLECTION_PG],
                               pg_calls),
            CHROMA: Arm(CHROMA, search_answer(chroma_calls), counting[CHROMA], chroma_calls),
            READER: Arm(READER, lambda r: reader.retrieve(r.query, r.entities, r.terms),
                        counting[READER]),
        }  # fmt: skip
        for request in warm_pass[:CHROMA_WARMUP]:  # Chroma's connection and index load
            arms[CHROMA].answer(request)
        for request in warm_pass:  # the app that has run a while
            arms[COLLECTION_PG].answer(request)
            arms[READER].answer(request)
        _reset_counts(arms)
        if served.target is None or served.target.backend != "pgvector":
            raise RuntimeError(f"the collection read {served.target}, not pgvector")
        answered = served.answered
        for i, request in enumerate(requests):
            for name in rotated(ARMS, i):
                arms[name].timed(request)
            log.info("request %d of %d: %s", i + 1, len(requests),
                     ", ".join(f"{n} {arms[n].seconds[-1]:.2f} s" for n in ARMS))  # fmt: skip
        arms[COLLECTION_PG].answered = {k: v - answered.get(k, 0)
                                        for k, v in served.answered.items()}  # fmt: skip
        exact = [search_answer(referee)(r) for r in requests]
    finally:
        for closing in (served.close, client.close, reader.close, referee.close):
            closing()
    pairs = zip(arms[CHROMA].answers, arms[COLLECTION_PG].answers, exact, strict=True)
    verdicts = [verdict({"Chroma": c, "pgvector": p}, e) for c, p, e in pairs]
    return arms, verdicts


def _reset_counts(arms: dict[str, Arm]) -> None:
    """Forget what the untimed passes counted (the calls and embeddings per request)."""
    for arm in arms.values():
        arm.answers.clear()
        arm.call_counts.clear()
        arm.embedder_calls = arm.texts = 0
        if arm.calls is not None:
            arm.calls.calls = dict.fromkeys(arm.calls.calls, 0)
