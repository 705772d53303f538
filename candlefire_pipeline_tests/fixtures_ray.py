"""`ray_cluster` (session): a real 2-CPU Ray head on 127.0.0.1, started on first use and stopped
with every process it spawned at the end of the session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_cluster():
    from candlefire_pipeline.embedding.ray_executor import disconnect
    from candlefire_pipeline_tests.ray_cluster import local_ray_cluster

    with local_ray_cluster(num_cpus=2) as cluster:
        try:
            yield cluster
        finally:
            disconnect()
