"""`dg dev` (webserver + daemon, what `make ui` runs) as a test fixture: free port, own group,
clean stop."""

from __future__ import annotations

import json
import signal
import sys
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from candlefire_pipeline_tests import procs

DG = Path(sys.executable).with_name("dg")

_WORKSPACE_QUERY = """
query {
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""

_SENSORS_QUERY = """
query {
  repositoriesOrError {
    ... on RepositoryConnection {
      nodes {
        sensors {
          id name
          sensorState { id status ticks(limit: 20) { status skipReason runIds } }
        }
      }
    }
  }
}
"""


@dataclass
class DagsterDev:
    """A running `dg dev`; talk to it over HTTP/GraphQL like the UI does."""

    proc: Any
    port: int
    home: Path
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: Mapping[str, Any] | None = None) -> dict:
        """Run a GraphQL operation; raise on transport or GraphQL errors."""
        body = json.dumps({"query": query, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = json.loads(response.read())
        if payload.get("errors"):
            raise RuntimeError(f"GraphQL errors: {payload['errors']}")
        return payload["data"]

    def wait_until_loaded(self, limit_s: float = procs.STARTUP_LIMIT_S) -> None:
        """Wait until every code location has loaded; raise with its error if one failed."""

        def loaded() -> bool:
            entries = self.graphql(_WORKSPACE_QUERY)["workspaceOrError"]["locationEntries"]
            for entry in entries:
                error = entry["locationOrLoadError"] or {}
                if error.get("__typename") == "PythonError":
                    raise RuntimeError(f"code location {entry['name']} failed: {error['message']}")
            return bool(entries) and all(e["loadStatus"] == "LOADED" for e in entries)

        procs.wait_until(
            loaded, proc=self.proc, log_path=self.log_path, what="code location", limit_s=limit_s
        )

    def dismiss_onboarding(self) -> None:
        """Mark the community pop-up seen (it covers the page on a fresh instance)."""
        self.graphql("mutation { setNuxSeen }")

    def sensor(self, name: str) -> dict:
        """The sensor as the UI sees it: id, state and its latest ticks (newest first)."""
        repos = self.graphql(_SENSORS_QUERY)["repositoriesOrError"]["nodes"]
        sensors = [s for repo in repos for s in repo["sensors"] if s["name"] == name]
        if not sensors:
            raise RuntimeError(f"sensor {name!r} not in the workspace")
        return sensors[0]

    def stop_sensor(self, name: str) -> str:
        """Stop a sensor the way the UI toggle does; return its new status."""
        sensors = [self.sensor(name)]
        result = self.graphql(
            "mutation($id: String) { stopSensor(id: $id) {"
            " ... on StopSensorMutationResult { instigationState { status } }"
            " ... on PythonError { message } } }",
            {"id": sensors[0]["sensorState"]["id"]},
        )["stopSensor"]
        if "instigationState" not in result:
            raise RuntimeError(f"stopSensor({name}) failed: {result}")
        return result["instigationState"]["status"]


@contextmanager
def running_dagster_dev(
    target: Sequence[str],
    *,
    home: Path,
    env: Mapping[str, str],
    log_path: Path,
    cwd: Path | None = None,
) -> Iterator[DagsterDev]:
    """Start `dg dev <target>` on a free 127.0.0.1 port; on exit stop every process it made.

    Stops with SIGINT to the leader (dg dev's own clean shutdown of webserver, daemon and
    code servers), then SIGTERM/SIGKILL to whatever of its group and descendants is left;
    raises if anything survives.
    """
    port = procs.free_port()
    proc = procs.spawn(
        [DG, "dev", *target, "--host", "127.0.0.1", "--port", str(port)],
        log_path=log_path,
        env={**env, "DAGSTER_HOME": str(home), "VIRTUAL_ENV": sys.prefix},
        cwd=cwd,
    )
    dev = DagsterDev(proc=proc, port=port, home=home, log_path=log_path)
    try:
        procs.wait_until(
            procs.http_ok(f"{dev.url}/server_info"),
            proc=proc,
            log_path=log_path,
            what="dg dev",
        )
        yield dev
    finally:
        procs.stop_group(proc, first=signal.SIGINT)
