"""Reads from a streaming replica (hot standby) of the pgvector store (docs/OPERATIONS.md,
"A read replica for the app")."""

from __future__ import annotations

from dataclasses import dataclass, field

from candlefire_pipeline.settings.env import check_between, env_float, env_str


@dataclass(frozen=True)
class ReplicaSettings:
    #: CANDLEFIRE_PG_READ_DSN: where the app's reads (ServingReader, open_collection) go; None:
    #: the store's own DSN (CANDLEFIRE_PG_DSN or the embedded server). A secret: never logged.
    read_dsn: str | None = field(default=None, repr=False)
    #: CANDLEFIRE_REPLICA_WAIT_SECONDS: how long a reader with nothing served yet waits for the
    #: replica to replay the switch's WAL position before refusing (a running reader never waits:
    #: it keeps serving what it served)
    wait_seconds: float = 10.0

    def __post_init__(self) -> None:
        check_between("CANDLEFIRE_REPLICA_WAIT_SECONDS", self.wait_seconds, 0, 3600)

    @property
    def configured(self) -> bool:
        return self.read_dsn is not None

    @classmethod
    def from_env(cls) -> ReplicaSettings:
        return cls(
            read_dsn=env_str("CANDLEFIRE_PG_READ_DSN"),
            wait_seconds=env_float("CANDLEFIRE_REPLICA_WAIT_SECONDS", cls.wait_seconds),
        )
