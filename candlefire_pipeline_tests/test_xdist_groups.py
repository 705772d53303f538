"""`make test`'s scheduling holds: a module with a module-scoped fixture runs on one xdist worker
(its fixture built once per run), and the slow tests are handed out first."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import defaultdict

from candlefire_pipeline.settings import REPO_ROOT

#: test_demo.py's tests share two module fixtures; test_drops.py's share none.
GROUPED, FREE = "corpus/test_demo.py", "corpus/test_drops.py"
_RESULT = re.compile(r"^\[(gw\d+)\].* PASSED candlefire_pipeline_tests/(\S+?)::(.+?)\s*$")


def _workers(*args: str) -> dict[str, set[str]]:
    """module -> the workers that ran its tests, in a `make test`-like run of these modules."""
    command = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", "-n", "3",
               "--dist", "loadgroup", *args]  # fmt: skip
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran: dict[str, set[str]] = defaultdict(set)
    for line in done.stdout.splitlines():
        if match := _RESULT.match(line):
            worker, module, name = match.groups()
            ran[module].add(worker)
            assert module != GROUPED or name.endswith(f"@{GROUPED}"), line  # its group's node id
    return ran


def test_a_module_fixtures_tests_run_on_one_worker():
    # pytest 9.2 dropped the node id field xdist 3.8 writes the group into (pytest-xdist#1386):
    # this failed there, every worker building the module's fixtures again
    ran = _workers(f"candlefire_pipeline_tests/{GROUPED}", f"candlefire_pipeline_tests/{FREE}")
    assert len(ran[GROUPED]) == 1, ran
    assert len(ran[FREE]) > 1, ran  # the others spread
