"""App threads sharing one collection across a network: requests per second at each RTT.

The collection is the network arms' open_collection() (its process copy on, warm), behind its
delay proxy. After an untimed round that opens the threads' lanes, each round runs `count`
threads over the requests with question texts never seen before (unseen.py), at every RTT in
turn, the order reversed every other round so drift falls on both alike; requests per second =
all requests at an RTT / their seconds. Also counted: the connections the collection opened (its
lanes: at most CANDLEFIRE_PG_POOL_SIZE) and those open at the proxy afterwards, and the round
trips per request on the wire.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from benchmarks.app.network import COPY_ON, WATCH_NAME, Across, store_of
from benchmarks.app.scaled import shared_by_threads
from benchmarks.app.unseen import unseen
from benchmarks.common.requests import Request
from candlefire_pipeline.app.pg_lanes import APP_NAME

log = logging.getLogger(__name__)


@dataclass
class Throughput:
    """`threads` threads at one RTT, summed over the rounds."""

    rtt: float
    threads: int
    requests: int = 0
    seconds: float = 0.0
    round_trips: int = 0
    lanes: int = 0  # connections the collection opened, at most
    connections: dict = field(default_factory=dict)  # open at the proxy after the rounds

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def trips_per_request(self) -> float:
        return self.round_trips / self.requests if self.requests else 0.0


def throughput(net: Across, rtts: list[float], requests: list[Request], count: int,
               rounds: int = 2) -> dict[float, Throughput]:  # fmt: skip
    """Per RTT: `count` threads sharing the copy-on collection over `rounds` of the requests."""
    arm = net.arms[COPY_ON]
    store = store_of(arm.collection)
    out = {rtt: Throughput(rtt, count) for rtt in rtts}
    net.set_rtt(rtts[0])
    shared_by_threads(arm.collection, unseen(requests, "threads warm"), count)  # its lanes open
    for k in range(rounds):
        for rtt in rtts if k % 2 == 0 else list(reversed(rtts)):
            net.set_rtt(rtt)
            work = unseen(requests, f"threads {k} at {rtt:g} ms")
            trips = arm.proxy.round_trips(APP_NAME)
            seconds = shared_by_threads(arm.collection, work, count)
            result = out[rtt]
            result.requests += len(work)
            result.seconds += seconds
            result.round_trips += arm.proxy.round_trips(APP_NAME) - trips
            result.lanes = max(result.lanes, store.lanes.opened)
            log.info("%d threads at %g ms: %.1f requests/s, %d lanes", count, rtt,
                     len(work) / seconds, store.lanes.opened)  # fmt: skip
    for result in out.values():
        result.connections = {
            name: n for name, n in arm.proxy.connections().items() if name in (APP_NAME,
                                                                                 WATCH_NAME)
        }  # fmt: skip
    return out
