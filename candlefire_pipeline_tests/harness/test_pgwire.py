"""The delay proxy's DSN handling and startup parsing, without a server."""

from __future__ import annotations

import struct

import pytest
from psycopg.conninfo import conninfo_to_dict

from candlefire_harness.pgwire import (
    GSSENC_REQUEST,
    SSL_REQUEST,
    StartupParser,
    dsn_target,
    proxied_dsn,
)


def test_the_embedded_servers_uri_names_its_socket():
    uri = "postgresql://postgres:@/postgres?host=/tmp/pg-x/data"
    assert dsn_target(uri) == "/tmp/pg-x/data/.s.PGSQL.5432"
    assert dsn_target("host=/run/pg port=6543 dbname=x") == "/run/pg/.s.PGSQL.6543"
    assert dsn_target("postgresql://u@db.example:6000/x") == ("db.example", 6000)
    assert dsn_target("host=db.example hostaddr=10.0.0.5 dbname=x") == ("10.0.0.5", 5432)


def test_a_dsn_without_one_host_is_refused(monkeypatch):
    monkeypatch.delenv("PGHOST", raising=False)
    with pytest.raises(ValueError, match="no host"):
        dsn_target("dbname=x")
    with pytest.raises(ValueError, match="multi-host"):
        dsn_target("host=a,b port=5432,5433 dbname=x")


def test_the_proxied_dsn_keeps_every_parameter_but_the_address():
    dsn = "postgresql://app:s3cret@db.example:6000/corpus?sslmode=disable&hostaddr=10.0.0.5"
    assert conninfo_to_dict(proxied_dsn(dsn, 41000)) == {
        "user": "app",
        "password": "s3cret",
        "dbname": "corpus",
        "sslmode": "disable",
        "host": "127.0.0.1",
        "port": "41000",
    }


def _message(code: int, body: bytes = b"") -> bytes:
    return struct.pack("!ii", 8 + len(body), code) + body


STARTUP = _message(196608, b"user\0postgres\0application_name\0reader\0database\0x\0\0")


def test_the_startup_after_a_refused_probe_is_read():
    parser = StartupParser()
    assert not parser.feed_client(_message(GSSENC_REQUEST))
    parser.feed_server(b"N")
    assert not parser.feed_client(_message(SSL_REQUEST))
    parser.feed_server(b"N")
    assert not parser.feed_client(STARTUP[:10])  # split across chunks
    assert parser.feed_client(STARTUP[10:])
    assert parser.application_name == "reader"


def test_an_accepted_probe_or_no_name_leaves_the_connection_untagged():
    parser = StartupParser()
    parser.feed_client(_message(SSL_REQUEST))
    parser.feed_server(b"S")  # TLS from here: nothing to read
    assert parser.done and parser.application_name is None
    unnamed = StartupParser()
    assert unnamed.feed_client(_message(196608, b"user\0postgres\0\0"))
    assert unnamed.application_name is None
    assert StartupParser().feed_client(b"GET / HTTP/1.1\r\n")  # not Postgres: given up
