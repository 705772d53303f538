"""A fresh clone: `make test` sets up everything it needs; Makefile, CI and README agree."""

import os
import subprocess
import sys
from pathlib import Path

from candlefire_pipeline.settings import REPO_ROOT

DG = Path(sys.executable).with_name("dg")


def _dry_run(target: str) -> str:
    done = subprocess.run(
        ["make", "-n", target], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout


def test_make_test_installs_the_browser_with_the_script_ci_uses():
    commands = _dry_run("test")
    assert "bash .ci/install-browser" in commands
    assert commands.index(".ci/install-browser") < commands.index("pytest")


def test_make_lint_checks_the_definitions_with_dg():
    assert "dg check defs" in _dry_run("lint")


def test_ci_runs_the_same_make_targets_a_developer_does():
    script = (REPO_ROOT / ".ci" / "run").read_text()
    assert "make lint" in script and "make test" in script
    commands = [line.strip() for line in script.splitlines() if not line.startswith("#")]
    assert not any("install-browser" in line for line in commands)  # `make test` does it


def test_the_readme_says_what_make_test_sets_up():
    readme = (REPO_ROOT / "README.md").read_text()
    assert ".ci/install-browser" in readme and "dg check defs" in readme
    assert "dg launch" in readme and "dg dev" in readme


def test_dg_check_defs_loads_the_code_location(tmp_path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "VIRTUAL_ENV": sys.prefix}
    done = subprocess.run(
        [DG, "check", "defs"], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "All definitions loaded successfully" in done.stdout + done.stderr
    assert "Warning" not in done.stdout + done.stderr
