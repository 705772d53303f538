"""The backup tests' deployment: a data dir of the test's own with its embedded server."""

from __future__ import annotations

import pytest

from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.operations.backup.recover import staging_dir
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.fixtures_backends import pg_data_root


@pytest.fixture
def deployment(monkeypatch):
    """Settings on a data dir of the test's own, its embedded server under data/pg (stopped at
    the end, with any staging server a failed restore left)."""
    with pg_data_root() as root:
        monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(root / "data"))
        monkeypatch.delenv("CANDLEFIRE_PG_DSN", raising=False)
        settings = Settings.from_env()
        try:
            yield settings
        finally:
            EmbeddedPostgres(settings.pg_data_dir).stop()
            EmbeddedPostgres(staging_dir(settings.pg_data_dir)).stop()
