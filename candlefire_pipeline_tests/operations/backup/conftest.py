"""The backup tests' deployment: a data dir of the test's own with its embedded server."""

from __future__ import annotations

import pytest

from candlefire_pipeline_tests.operations.backup.steps import own_deployment


@pytest.fixture
def deployment(monkeypatch):
    """Settings on a data dir of the test's own, its embedded server under data/pg."""
    with own_deployment(monkeypatch) as settings:
        yield settings
