"""`candlefire replica create | start | stop | status | remove`: the embedded Postgres' streaming
replica the app can read (CANDLEFIRE_PG_READ_DSN), and how far it is behind the switch
(docs/OPERATIONS.md, "A read replica for the app")."""

from __future__ import annotations

import argparse

from candlefire_pipeline.settings import Settings, redact_dsn

VERBS = {
    "create": "base backup of the embedded primary as a hot standby, then start it",
    "start": "start the replica (it catches up through its slot)",
    "stop": "stop the replica (its slot keeps the WAL it needs on the primary)",
    "status": "its lag, and whether it has replayed the switch's last change and drop",
    "remove": "stop it, drop its slot on the primary, delete its directory",
}


def add_parser(add) -> None:
    replica = add("replica", help="the embedded streaming replica for the app's reads")
    verbs = replica.add_subparsers(dest="replica_verb", required=True)
    for verb, summary in VERBS.items():
        verbs.add_parser(verb, help=summary)


def embedded_replica(settings: Settings):
    """The replica of the embedded primary; refused for an external Postgres (its provider
    makes and runs the standby)."""
    from candlefire_pipeline.backends.pg.replica import EmbeddedReplica
    from candlefire_pipeline.backends.pg.server import EmbeddedPostgres

    if settings.pg_dsn:
        raise ValueError("CANDLEFIRE_PG_DSN names an external Postgres: make its standby with "
                         "the provider, then set CANDLEFIRE_PG_READ_DSN")  # fmt: skip
    return EmbeddedReplica(EmbeddedPostgres(settings.pg_data_dir), settings.pg_replica_dir)


def cmd_replica(args: argparse.Namespace, settings: Settings) -> int:
    """0 done (status: the replica holds the switch's last change), 1 status: behind it."""
    if args.replica_verb == "status":
        return _status(settings)
    replica = embedded_replica(settings)
    if args.replica_verb == "create":
        replica.create()
        print(f"replica made and started under {replica.data_dir} (slot {replica.slot})")
        print(f"read it as the reader role: CANDLEFIRE_PG_READ_DSN='{replica.dsn} user=ROLE'")
    elif args.replica_verb == "start":
        replica.start()
        print(f"replica started: {replica.dsn}")
    elif args.replica_verb == "stop":
        replica.stop()
        print("replica stopped")
    else:
        replica.remove()
        print(f"replica removed: {replica.data_dir} deleted, slot {replica.slot} dropped")
    return 0


def _status(settings: Settings) -> int:
    from candlefire_pipeline.operations.serving.replication import ReplicaGate
    from candlefire_pipeline.operations.serving.state import read_state

    if not settings.pg_dsn and settings.pg_replica_dir.exists():
        print(embedded_replica(settings).status().describe())
    if not settings.replica.configured:
        print("CANDLEFIRE_PG_READ_DSN is not set: the app reads the primary")
        return 0
    state, gate = read_state(settings.serving_file), ReplicaGate(settings.replica)
    try:
        replay = gate.replay()
    finally:
        gate.close()
    print(f"reads from {redact_dsn(settings.replica.read_dsn)}: replayed up to "
          f"{replay.replayed or '-'} (standby: {replay.in_recovery})")  # fmt: skip
    behind = False
    for what, lsn in (("switch's last change", state.wal_lsn),
                      ("last drop applied", state.applied_lsn)):  # fmt: skip
        if lsn is None:
            print(f"{what}: no WAL position recorded")
            continue
        held = replay.has_replayed(lsn)
        behind |= what.startswith("switch") and not held
        print(f"{what} at {lsn}: {'replayed' if held else 'NOT replayed yet'}")
    return 1 if behind else 0
