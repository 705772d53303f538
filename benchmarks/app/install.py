"""What `pip install -c constraints.txt <repo>` puts in a fresh venv, and what importing the app
module then costs: the `app-install` line of the app-network section.

The repo's tracked files (its work tree as checked out, without data/) are copied to a temporary
folder and installed from there, not editable, into a new venv (`python -m venv`, pip's own cache
and the machine's package index). MB = the venv's site-packages less what pip and setuptools
installed (what the venv came with: pip, setuptools, pkg_resources, _distutils_hack, as their
RECORDs list them); distributions = `pip list` less pip and setuptools;
import CPU = the median over fresh processes of time.process_time() around `import <module>`,
run outside the repo with no PYTHONPATH, so the installed copy is the one imported.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common.figures import MB
from candlefire_pipeline.settings import REPO_ROOT

log = logging.getLogger(__name__)

APP_MODULE = "candlefire_pipeline.app"
#: The distributions a new venv holds before anything is installed (not counted).
VENV_OWN = ("pip", "setuptools")
IMPORT_RUNS = 5
TIMEOUT_S = 3600
IMPORT_CODE = (
    "import json, time\n"
    "started = time.process_time()\n"
    "import {module}\n"
    "print(json.dumps(time.process_time() - started))\n"
)


@dataclass(frozen=True)
class Install:
    bytes: int
    distributions: int
    import_cpu_s: float
    seconds: float  # the install's wall time (with pip's cache)

    @property
    def mb(self) -> float:
        return self.bytes / MB

    def line(self) -> str:
        return (f"app-install: {self.mb:,.0f} MB, {self.distributions} distributions;"
                f" import {self.import_cpu_s:.2f} s CPU")  # fmt: skip


def tracked_copy(repo: Path, target: Path) -> Path:
    """The repo's tracked files, as they are in its work tree, copied under `target`."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], capture_output=True,
                            check=True).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = repo / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def _clean_env() -> dict[str, str]:
    """The environment without what would import another copy of the project."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


def _run(command: list, cwd: Path) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, env=_clean_env(), text=True,
                          capture_output=True, timeout=TIMEOUT_S, check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, command[:4]))} failed:\n{done.stderr[-3000:]}")
    return done.stdout


def site_packages(venv: Path) -> Path:
    found = list((venv / "lib").glob("python3*/site-packages"))
    if len(found) != 1:
        raise RuntimeError(f"no single site-packages under {venv}")
    return found[0]


def venv_own(packages: Path) -> set[str]:
    """The top-level entries of site-packages that pip and setuptools installed (their RECORDs:
    pip, setuptools, pkg_resources, _distutils_hack, their .dist-info, the .pth)."""
    own = set()
    for record in packages.glob("*.dist-info/RECORD"):
        if record.parent.name.split("-")[0].lower() in VENV_OWN:
            for line in record.read_text().splitlines():
                top = line.split(",")[0].split("/")[0]
                if top and top != "..":
                    own.add(top)
    return own


def installed_bytes(packages: Path) -> int:
    """Bytes under site-packages, less what pip and setuptools installed."""
    own = venv_own(packages)
    total = 0
    for path in packages.rglob("*"):
        if path.is_file() and not path.is_symlink():
            if path.relative_to(packages).parts[0] not in own:
                total += path.stat().st_size
    return total


def measure(project: Path | None = None, constraints: Path | None = None,
            module: str = APP_MODULE, runs: int = IMPORT_RUNS) -> Install:  # fmt: skip
    """A fresh venv with `project` (default: this repo's tracked files) installed under the
    constraints (default: the project's constraints.txt, if it has one)."""
    import time

    with tempfile.TemporaryDirectory(prefix="bench-app-install-") as root:
        root = Path(root)
        source = project or tracked_copy(REPO_ROOT, root / "source")
        constraints = constraints or (source / "constraints.txt")
        venv = root / "venv"
        python = venv / "bin" / "python"
        _run([sys.executable, "-m", "venv", venv], root)
        command = [python, "-m", "pip", "install", "--quiet", source]
        if constraints.exists():
            command[4:4] = ["-c", constraints]
        started = time.perf_counter()
        _run(command, root)
        seconds = time.perf_counter() - started
        listed = json.loads(_run([python, "-m", "pip", "list", "--format", "json"], root))
        distributions = [d for d in listed if d["name"].lower() not in ("pip", "setuptools")]
        cpu = [json.loads(_run([python, "-c", IMPORT_CODE.format(module=module)], root))
               for _ in range(runs)]  # fmt: skip
        result = Install(installed_bytes(site_packages(venv)), len(distributions),
                         statistics.median(cpu), seconds)  # fmt: skip
    log.info("%s (install %.0f s)", result.line(), result.seconds)
    return result
