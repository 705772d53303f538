"""The app benchmark's network part, short (`--quick` at a small size, the hashing model): every
arm across the delay proxy at 0 and 10 ms, the threads, the staleness window; the section
printed with its closing lines, docs/BENCHMARKS.md not written. And the install measurement on a
tiny project in a fresh venv. No timing is asserted: the code paths run."""

from __future__ import annotations

import re

import pytest

from benchmarks import __main__ as cli
from benchmarks.app import install
from benchmarks.common import section
from candlefire_pipeline_tests.fixtures_backends import pg_data_root

pytestmark = pytest.mark.server  # an embedded Postgres, delay proxies, a fresh venv


@pytest.fixture
def bench_dir(monkeypatch):
    """The benchmark's folder (its embedded Postgres' data) where the server's user reaches it."""
    with pg_data_root() as root:
        monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(root / "bench"))
        yield root


def test_the_quick_network_part_runs_every_arm_and_ends_with_the_issues_lines(
    shared_data, bench_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("CANDLEFIRE_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1")
    monkeypatch.setattr(section, "BENCHMARKS_MD", tmp_path / "BENCHMARKS.md")
    argv = ["app", "--quick", "--parts", "network", "--sizes", "2500", "--install", "no"]
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    new = out.split("**repeated requests")[0]
    rows = {
        (m[0], m[1]): float(m[2])
        for m in re.findall(
            r"^\| (\d+) ms \([\d.]+\) \| ([^|]+?) \|.*\| ([\d.]+) \(max \d+\) \|", new, re.M
        )
    }
    # four arms at 0 ms (Chroma without round trips), three at 10 ms, new and repeated texts
    assert "| 0 ms (" in out and "| Chroma collection |" in out
    copy_on, copy_off = (
        rows[("10", "open_collection()")],
        rows[("10", "open_collection(), copy off")],
    )
    assert copy_off > copy_on and rows[("10", "ServingReader")] > 0
    assert "| 10 ms | 2 | 8 |" in out  # 2 threads, 2 rounds of 4 requests
    assert re.search(r"^\| 10 ms \| [\d.,]+ / [\d.,]+ \| [\d.,]+ / [\d.,]+ \|", out, re.M)
    lines = out.strip().splitlines()[-4:]
    assert lines[0] == "app-network 2ms: not measured in this run"
    assert re.fullmatch(r"app-network 10ms: collection p95 [\d.,]+ ms, reader p95 [\d.,]+ ms"
                        r" \([\d.]+x\); round trips per request [\d.]+", lines[1])  # fmt: skip
    assert re.fullmatch(r"app-network threads: 2 threads at 10 ms reach [\d.]+x their 0 ms"
                        r" requests/s", lines[2])  # fmt: skip
    assert lines[3] == "app-install: not measured"
    assert not (tmp_path / "BENCHMARKS.md").exists()


def test_the_install_is_measured_in_a_fresh_venv(tmp_path):
    project = tmp_path / "tiny"
    (project / "tinyapp").mkdir(parents=True)
    (project / "tinyapp" / "__init__.py").write_text("VALUE = 1\n")
    (project / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinyapp"\nversion = "0.1"\n'
        '[tool.setuptools]\npackages = ["tinyapp"]\n'
    )
    (project / "constraints.txt").write_text("")
    measured = install.measure(project, module="tinyapp", runs=2)
    assert measured.distributions == 1  # tinyapp alone: pip and setuptools are not counted
    assert 0 < measured.bytes < 1_000_000 and measured.import_cpu_s >= 0
    assert re.fullmatch(r"app-install: \d+ MB, 1 distributions; import [\d.]+ s CPU",
                        measured.line())  # fmt: skip


def test_the_tracked_files_are_what_gets_installed(tmp_path):
    copied = install.tracked_copy(install.REPO_ROOT, tmp_path)
    assert (copied / "pyproject.toml").exists() and (copied / "candlefire_pipeline").is_dir()
    assert not (copied / "data" / "bench_retrieval").exists()
