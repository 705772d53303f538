"""Fixtures of the reliability tests that kill servers."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline_tests.fixtures_backends import pg_data_root


@pytest.fixture
def own_pg():
    """A Postgres of this test's own: it gets killed, the session server must not."""
    with pg_data_root() as root:
        server = EmbeddedPostgres(root / "data")
        server.dsn  # noqa: B018 - start it
        try:
            yield server
        finally:
            server.stop()
