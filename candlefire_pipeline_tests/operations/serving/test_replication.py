"""The switch's WAL positions and the follower's replica gate, without a server: a reader on a
replica that has not replayed a change keeps the previous target (or, with nothing served yet,
waits bounded and refuses); a switch file from before the positions reads as before."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from candlefire_pipeline.backends.pg.wal import Replay, lsn_value
from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.operations.serving.follow import SwitchFollower
from candlefire_pipeline.operations.serving.replication import ReplicaBehindError, ReplicaGate
from candlefire_pipeline.operations.serving.state import (
    INITIAL,
    PROMOTED,
    ServingState,
    Target,
    read_state,
)
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.settings.replica import ReplicaSettings

READ_DSN = "host=/replica user=candlefire_reader password=not-logged dbname=candlefire"
PG, CHROMA = Target("pgvector"), Target("chroma")


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(data_dir=tmp_path / "data", drops_dir=tmp_path / "drops")


class FakeReplica:
    """The replica's replay position as the test sets it (None: a primary)."""

    def __init__(self, replayed: str | None) -> None:
        self.replayed, self.asked = replayed, 0

    def __call__(self) -> Replay:
        self.asked += 1
        return Replay(self.replayed is not None, self.replayed, None)


@pytest.fixture
def replica(monkeypatch) -> FakeReplica:
    fake = FakeReplica("0/1000")
    monkeypatch.setattr(ReplicaGate, "replay", lambda _gate: fake())
    return fake


def _follower(settings: Settings, opened: list) -> SwitchFollower:
    def open_served(target, view, _embedder):
        opened.append((target, view.pg_dsn))
        return str(target)

    return SwitchFollower(settings, embedder=None, open_served=open_served,
                          close_served=lambda _served: None)  # fmt: skip


def _switch(settings: Settings, state: ServingState) -> None:
    settings.serving_file.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(settings.serving_file, state.to_json())


def test_wal_positions_order_as_postgres_orders_them():
    assert lsn_value("0/FF") < lsn_value("1/0") < lsn_value("16/B374D848")
    assert lsn_value("16/B374D848") == (0x16 << 32) + 0xB374D848
    for bad in ("", "16", "x/1", "1/2/3", "123456789/0"):
        with pytest.raises(ValueError, match="not a WAL position"):
            lsn_value(bad)


def test_only_a_standby_can_lack_a_position():
    assert Replay(False, None, None).has_replayed("FF/0")  # a primary has all it wrote
    assert not Replay(True, None, None).has_replayed("0/1")
    assert not Replay(True, "0/FFF", None).has_replayed("0/1000")
    assert Replay(True, "0/1000", None).has_replayed("0/1000")


def test_a_switch_file_from_before_wal_positions_reads_as_before(settings):
    settings.serving_file.parent.mkdir(parents=True)
    old = {"backend": "pgvector", "state": PROMOTED, "report_id": "r1", "reason": "flip"}
    settings.serving_file.write_text(json.dumps(old))
    state = read_state(settings.serving_file)
    assert (state.target, state.wal_lsn, state.applied_lsn) == (PG, None, None)
    settings.serving_file.write_text(json.dumps({**old, "wal_lsn": "yesterday"}))
    with pytest.raises(ValueError, match="'wal_lsn' is not a WAL position"):
        read_state(settings.serving_file)


def test_without_a_replica_nothing_is_asked_and_the_store_dsn_is_used(settings, replica):
    _switch(settings, ServingState(PROMOTED, report_id="r1", wal_lsn="9/0"))
    opened: list = []
    follower = _follower(settings, opened)
    assert follower.replica is None
    assert follower.current() == ("pgvector/default", PG)
    assert opened == [(PG, None)] and replica.asked == 0


def test_a_lagging_replica_keeps_the_previous_target_until_it_replays_the_change(settings, replica):
    reading = replace(settings, replica=ReplicaSettings(read_dsn=READ_DSN, wait_seconds=0))
    _switch(settings, ServingState(INITIAL, wal_lsn="0/800"))
    opened: list = []
    follower = _follower(reading, opened)
    assert follower.current()[1] == CHROMA  # Chroma is not on the replica: never held back
    assert replica.asked == 0

    _switch(settings, ServingState(PROMOTED, report_id="r1", wal_lsn="0/2000"))
    for _ in range(3):  # every request asks again and keeps the previous target
        assert follower.current() == ("chroma/default", CHROMA)
    assert replica.asked == 3 and follower.replica.waiting_for == "0/2000"
    assert follower.state.state == INITIAL  # what serves, not what the switch says yet

    replica.replayed = "0/2000"
    assert follower.current() == ("pgvector/default", PG)
    assert opened == [(CHROMA, READ_DSN), (PG, READ_DSN)]  # pgvector read on the replica
    assert follower.replica.waiting_for is None and follower.state.state == PROMOTED
    follower.current()
    assert replica.asked == 4  # the file did not change: the replica is not asked again


def test_a_new_reader_waits_bounded_then_refuses_in_one_line(settings, replica):
    reading = replace(settings, replica=ReplicaSettings(read_dsn=READ_DSN, wait_seconds=0))
    _switch(settings, ServingState(PROMOTED, report_id="r1", wal_lsn="0/2000"))
    follower = _follower(reading, [])
    with pytest.raises(ReplicaBehindError) as refused:
        follower.current()
    message = str(refused.value)
    assert "pgvector/default" in message and "0/2000" in message and "\n" not in message
    assert follower.served is None
    replica.replayed = "0/3000"
    assert follower.current()[1] == PG


def test_a_drop_recorded_after_the_change_does_not_hold_the_reader_back(settings, replica):
    """applied_lsn says how far a replica must replay to show a drop; the replica shows the
    store as before the drop until then (the previous state), so no target waits for it."""
    reading = replace(settings, replica=ReplicaSettings(read_dsn=READ_DSN, wait_seconds=0))
    _switch(settings, ServingState(PROMOTED, report_id="r1", wal_lsn="0/1000",
                                   applied_lsn="0/9000"))  # fmt: skip
    follower = _follower(reading, [])
    assert follower.current()[1] == PG
