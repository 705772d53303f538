"""The daily PubMed fetch end to end: schedule -> fetch job -> drop file -> drop sensor.

Against the project's recorded E-utilities answers, served over real HTTP on loopback.
"""

import http.server
import threading
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from candlefire_pipeline.defs.fetch_job import pubmed_fetch_job
from candlefire_pipeline.defs.resources import PipelineResource, PubmedResource
from candlefire_pipeline.defs.schedules import pubmed_fetch_schedule
from candlefire_pipeline.defs.sensors import pubmed_drops_sensor
from candlefire_pipeline_tests.eutils_fake import PMIDS, FakeEutils, http_error, recorded
from candlefire_pipeline_tests.eutils_fake import written_pmids as pmids_in


class _Handler(http.server.BaseHTTPRequestHandler):
    fake: FakeEutils

    def do_GET(self) -> None:
        try:
            body, status = self.fake(f"http://127.0.0.1{self.path}"), 200
        except Exception as exc:  # a scripted HTTPError becomes its status
            body, status = exc.read(), exc.code
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def eutils():
    """start(fake) -> base URL of a loopback server answering from `fake`."""
    servers = []

    def start(fake: FakeEutils) -> str:
        handler = type("Handler", (_Handler,), {"fake": fake})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/entrez/eutils/"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def drops(tmp_path, monkeypatch):
    monkeypatch.setenv("CANDLEFIRE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("CANDLEFIRE_PUBMED_QUERY", "SPG302 OR TDP-43")
    monkeypatch.setenv("CANDLEFIRE_PUBMED_LOOKBACK_DAYS", "3")
    return tmp_path / "data" / "drops"


def _today() -> datetime:
    """Today's 01:00 UTC tick of the schedule."""
    return datetime.now(UTC).replace(hour=1, minute=0, second=0, microsecond=0)


def _scheduled_fetch(
    instance, base_url: str, at: datetime | None = None, **config
) -> tuple[dg.RunRequest, dg.ExecuteInProcessResult]:
    context = dg.build_schedule_context(instance=instance, scheduled_execution_time=at or _today())
    request = pubmed_fetch_schedule(context)
    run_config = request.run_config
    run_config["ops"]["fetch_pubmed_drop"]["config"].update(config)
    result = pubmed_fetch_job.execute_in_process(
        run_config=run_config,
        instance=instance,
        resources={"pipeline": PipelineResource(), "pubmed": PubmedResource(base_url=base_url)},
        raise_on_error=False,
    )
    return request, result


def _op_metadata(result) -> dict:
    (event,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_OUTPUT]
    return {k: v.value for k, v in event.event_specific_data.metadata.items()}


def test_a_scheduled_fetch_writes_one_drop_that_the_sensor_then_launches(drops, eutils):
    fake = FakeEutils()
    at = _today()  # read once: a run across midnight UTC still expects the day it was given
    with dg.instance_for_test() as instance:
        request, result = _scheduled_fetch(instance, eutils(fake), at)
        assert result.success
        (drop,) = drops.iterdir()
        assert drop.name.endswith("-pubmed.xml") and pmids_in(drop) == PMIDS
        assert _op_metadata(result)["records"] == 5
        day = at.date()
        search = fake.calls[0].params
        assert search["term"] == "SPG302 OR TDP-43" and search["datetype"] == "edat"
        assert search["mindate"] == f"{day - timedelta(days=3):%Y/%m/%d}"
        assert search["maxdate"] == f"{day:%Y/%m/%d}"
        assert request.run_key == f"pubmed-fetch-{day.isoformat()}"

        first = pubmed_drops_sensor(dg.build_sensor_context(instance=instance))
        second = pubmed_drops_sensor(
            dg.build_sensor_context(instance=instance, cursor=first.cursor)
        )
        assert [r.partition_key for r in second.run_requests] == [drop.name]


def test_an_empty_day_writes_no_drop_and_says_so(drops, eutils):
    fake = FakeEutils(esearch=recorded("esearch_zero.json"))
    with dg.instance_for_test() as instance:
        _, result = _scheduled_fetch(instance, eutils(fake))
        messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert result.success
    assert any("no new PubMed records" in m and "no drop written (skipped)" in m for m in messages)
    assert not drops.exists() or list(drops.iterdir()) == []
    assert _op_metadata(result) == {
        "records": 0, "drop": "none (no new records)", "requests": 1, "retries": 0,
    }  # fmt: skip
    assert [c.utility for c in fake.calls] == ["esearch"]


def test_a_failed_fetch_fails_the_run_clearly_and_leaves_no_partial_drop(drops, eutils):
    # the first efetch page arrives, the second is refused: the .part file must go
    fake = FakeEutils(failures={("efetch", "3"): [lambda url: http_error(url, 400, body=b"bad")]})
    with dg.instance_for_test() as instance:
        _, result = _scheduled_fetch(instance, eutils(fake), batch_size=3)
        assert not result.success
        (failure,) = [e for e in result.all_events if e.is_step_failure]
        text = str(failure.event_specific_data.error)
        assert "PubMed fetch" in text and "no drop written" in text and "HTTP 400" in text
        assert [c.utility for c in fake.calls] == ["esearch", "efetch", "efetch"]
        assert list(drops.iterdir()) == []  # neither a drop nor a .part
        sensed = pubmed_drops_sensor(dg.build_sensor_context(instance=instance))
        assert sensed.run_requests == []
