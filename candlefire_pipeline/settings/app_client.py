"""How the app's collection talks to a Postgres across a network: its connections, their timeouts,
and the answers it copies into the app's process (docs/APP.md, "Across a network")."""

from __future__ import annotations

from dataclasses import dataclass

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from candlefire_pipeline.settings.env import check_between, check_choice, env_fields

METRICS = ("off", "prometheus")
#: where the app reads the serving switch: its file, or the copy published in Postgres
SWITCH_SOURCES = ("file", "postgres")
#: field -> the variable it is read from
_VARIABLES = {
    "staleness_ms": "CANDLEFIRE_APP_STALENESS_MS",
    "local_mb": "CANDLEFIRE_APP_LOCAL_MB",
    "pool_size": "CANDLEFIRE_PG_POOL_SIZE",
    "pool_timeout_s": "CANDLEFIRE_PG_POOL_TIMEOUT_S",
    "connect_timeout_s": "CANDLEFIRE_PG_CONNECT_TIMEOUT_S",
    "statement_timeout_ms": "CANDLEFIRE_PG_STATEMENT_TIMEOUT_MS",
    "dead_peer_s": "CANDLEFIRE_PG_DEAD_PEER_S",
    "metrics": "CANDLEFIRE_APP_METRICS",
    "metrics_port": "CANDLEFIRE_APP_METRICS_PORT",
    "switch_source": "CANDLEFIRE_SWITCH_SOURCE",
    "switch_poll_ms": "CANDLEFIRE_SWITCH_POLL_MS",
}


@dataclass(frozen=True)
class AppClientSettings:
    #: the longest the collection answers from its process copy after the last proof that the
    #: table has not moved (a change notification arrives within a network delay; a heartbeat
    #: every third of this proves the silence); 0: every call asks Postgres (one round trip
    #: per call, a drop seen by the very next call)
    staleness_ms: int = 1000
    #: the process copy of answers, least recently used dropped beyond it; 0: no copy
    local_mb: int = 256
    #: connections of one collection (its threads never wait on each other's round trips up
    #: to this many at once); opened on demand
    pool_size: int = 8
    #: how long a call waits for a free connection when all are busy
    pool_timeout_s: float = 10.0
    #: how long opening a connection may take (libpq connect_timeout)
    connect_timeout_s: int = 5
    #: the server ends a statement that runs longer (statement_timeout)
    statement_timeout_ms: int = 30_000
    #: a peer that stops answering is given up after about this long (TCP keepalives and
    #: tcp_user_timeout): a call on a dead network fails instead of hanging
    dead_peer_s: int = 10
    #: per-call and per-request metrics ("prometheus": prometheus_client, off by default)
    metrics: str = "off"
    #: with metrics on: serve them on this port (0: registered only, the app exposes them)
    metrics_port: int = 0
    #: "file": the switch file under CANDLEFIRE_DATA_DIR (a stat per call); "postgres": the copy
    #: the pipeline publishes in the DSN's Postgres, for an app sharing no disk with it (a Space)
    switch_source: str = "file"
    #: how often the published switch is read again (a promote or rollback reaches such an app
    #: within this, plus a round trip)
    switch_poll_ms: int = 1000

    def __post_init__(self) -> None:
        check_between("CANDLEFIRE_APP_STALENESS_MS", self.staleness_ms, 0, 3_600_000)
        check_between("CANDLEFIRE_APP_LOCAL_MB", self.local_mb, 0, 1_000_000)
        check_between("CANDLEFIRE_PG_POOL_SIZE", self.pool_size, 1, 1000)
        check_between("CANDLEFIRE_PG_POOL_TIMEOUT_S", int(self.pool_timeout_s), 0, 3600)
        check_between("CANDLEFIRE_PG_CONNECT_TIMEOUT_S", self.connect_timeout_s, 1, 3600)
        check_between("CANDLEFIRE_PG_STATEMENT_TIMEOUT_MS", self.statement_timeout_ms, 0,
                      86_400_000)  # fmt: skip
        check_between("CANDLEFIRE_PG_DEAD_PEER_S", self.dead_peer_s, 2, 3600)
        check_choice("CANDLEFIRE_APP_METRICS", self.metrics, METRICS)
        check_between("CANDLEFIRE_APP_METRICS_PORT", self.metrics_port, 0, 65535)
        check_choice("CANDLEFIRE_SWITCH_SOURCE", self.switch_source, SWITCH_SOURCES)
        check_between("CANDLEFIRE_SWITCH_POLL_MS", self.switch_poll_ms, 0, 3_600_000)

    @property
    def watched(self) -> bool:
        """Whether answers are copied into the process (kept current by the change watch)."""
        return self.staleness_ms > 0 and self.local_mb > 0

    def client_dsn(self, dsn: str, application_name: str) -> str:
        """The DSN with these timeouts (what the DSN sets itself is kept), named in
        pg_stat_activity as `application_name`."""
        given = conninfo_to_dict(dsn)
        statement = f"-c statement_timeout={self.statement_timeout_ms}"
        options = " ".join(filter(None, [given.get("options"), statement]))
        dead = self.dead_peer_s
        wanted = {
            "application_name": application_name,
            "connect_timeout": str(self.connect_timeout_s),
            # a peer gone silent: probes after a third of the bound, unacked data given up at it
            "keepalives": "1",
            "keepalives_idle": str(max(1, dead // 3)),
            "keepalives_interval": str(max(1, dead // 6)),
            "keepalives_count": "3",
            "tcp_user_timeout": str(dead * 1000),
        }
        extra = {k: v for k, v in wanted.items() if k not in given}
        return make_conninfo(dsn, options=options, **extra)

    @classmethod
    def from_env(cls) -> AppClientSettings:
        choices = {"metrics": METRICS, "switch_source": SWITCH_SOURCES}
        return cls(**env_fields(cls, _VARIABLES, choices))
