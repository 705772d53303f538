"""The app's slim install: the project installed without extras (`pip install -c constraints.txt
candlefire_pipeline`) into a fresh venv holds the read path only, and answers candle-fire's
call shapes exactly as the full install does.

The venv is built once for the module from a copy of the sources (pyproject.toml and the
package: a build in the worktree would leave build/ and egg-info behind), with the pinned
constraints. Its size is the bytes of every file under its site-packages except pip's and
setuptools' (their RECORDs), .pyc files compiled at install included.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from candlefire_pipeline.app import open_collection
from candlefire_pipeline.backends.factory import open_backend
from candlefire_pipeline.cli import SLIM_INSTALL
from candlefire_pipeline.embedding.embedders import HashingEmbedder
from candlefire_pipeline.operations.serving.published import publish_switch
from candlefire_pipeline.operations.serving.state import PINNED
from candlefire_pipeline_tests.app.corpus import deploy, promote_directly
from candlefire_pipeline_tests.app.read_path import candlefire_calls, differences

pytestmark = pytest.mark.server

REPO = Path(__file__).resolve().parents[2]
READ_PATH = Path(__file__).with_name("read_path.py")
#: The issue's bound on what the app installs (the model not counted).
MAX_INSTALLED_MB = 200
#: Distributions of the pipeline that must not come with the app.
PIPELINE_ONLY = ("dagster", "ray", "torch", "qdrant-client", "chromadb", "pyarrow", "pandas",
                 "sentence-transformers", "matplotlib")  # fmt: skip
#: The store's model inside the slim venv: the project's lexical embedder (numpy only).
MODEL = {"dim": 32, "model_id": "hashing-v1:32"}

INVENTORY = """
import json, os, sys, sysconfig
from importlib import metadata
site = sysconfig.get_paths()["purelib"]
tooling = set()
for name in ("pip", "setuptools"):
    try:
        tooling |= {os.path.realpath(f.locate()) for f in metadata.distribution(name).files}
    except metadata.PackageNotFoundError:
        pass
size = sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(site) for f in files
           if os.path.realpath(os.path.join(d, f)) not in tooling)
names = sorted({d.metadata["Name"] for d in metadata.distributions(path=[site])})
print(json.dumps({"bytes": size, "distributions": names}))
"""

CHILD = """
import json, runpy, sys
rules = runpy.run_path(sys.argv[2])
spec = json.loads(sys.argv[1])
import candlefire_pipeline
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.embedding.embedders import HashingEmbedder
collection = open_collection(embedder=HashingEmbedder(**spec["model"]))
answers = rules["candlefire_calls"](collection, spec["texts"], spec["variants"], spec["pmids"])
print(json.dumps({"answers": answers, "package": candlefire_pipeline.__file__,
                  "target": str(collection.target),
                  "forbidden": rules["forbidden"](list(sys.modules))}))
"""


@pytest.fixture(scope="module")
def slim_venv(tmp_path_factory) -> dict:
    """The venv's path, its size and its distributions, built once for the module."""
    root = tmp_path_factory.mktemp("slim-install")
    source = root / "source"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copytree(REPO / "candlefire_pipeline", source / "candlefire_pipeline",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    done = subprocess.run(
        [str(venv / "bin/pip"), "install", "-q", "-c", str(REPO / "constraints.txt"), str(source)],
        cwd=root, capture_output=True, text=True, timeout=1800,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    inventory = _run(venv, ["-c", INVENTORY], cwd=root)
    return {"path": venv, "root": root, **json.loads(inventory.stdout)}


def _run(venv: Path, args: list[str], cwd: Path, env=None) -> subprocess.CompletedProcess:
    done = subprocess.run([str(venv / "bin/python"), *args], cwd=cwd, env=env or _outside(),
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _outside() -> dict:
    """The environment without this session's settings and Python paths (PYTHONPATH would put
    the source tree before the installed package)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("CANDLEFIRE_", "PYTHON"))}


def _normalized(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def test_the_slim_install_holds_the_read_path_only(slim_venv):
    names = {_normalized(n) for n in slim_venv["distributions"]}
    counted = sorted(names - {"pip", "setuptools", "candlefire-pipeline"})
    megabytes = slim_venv["bytes"] / 1e6
    print(f"app-install: {megabytes:.0f} MB, {len(counted)} distributions besides the project "
          f"({', '.join(counted)}); site-packages without pip and setuptools")  # fmt: skip
    assert sorted(names & {_normalized(n) for n in PIPELINE_ONLY}) == []
    assert {"numpy", "psycopg", "pgvector", "candlefire-pipeline"} <= names
    assert megabytes <= MAX_INSTALLED_MB


def test_the_cli_of_a_slim_install_says_what_to_install(slim_venv):
    done = subprocess.run([str(slim_venv["path"] / "bin/candlefire"), "status"],
                          cwd=slim_venv["root"], env=_outside(), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and SLIM_INSTALL in lines[0], done.stderr[-2000:]
    assert "dagster" in lines[0]  # among the missing distributions it names


@pytest.fixture(scope="module")
def served_store(tmp_path_factory, pg_dsn):
    """The differential corpus (corpus.py) in pgvector, embedded with MODEL, promoted."""
    deployment = deploy(tmp_path_factory.mktemp("slim-store"), pg_dsn,
                        embedder=HashingEmbedder(**MODEL))  # fmt: skip
    yield deployment
    store = open_backend("pgvector", deployment.settings)
    store.reset()
    store.close()


def test_the_slim_install_answers_candlefire_calls_as_the_full_one(
    slim_venv, served_store, monkeypatch
):
    settings = served_store.settings
    env = {
        "CANDLEFIRE_DATA_DIR": str(settings.data_dir),
        "CANDLEFIRE_PG_DSN": settings.pg_dsn,
        "CANDLEFIRE_PG_TABLE": settings.pg_table,
        "CANDLEFIRE_EMBED_MODEL": MODEL["model_id"],
    }
    pmids = sorted({i.split("_")[0] for i in served_store.ids})[:6] + ["no-such-pmid"]
    spec = {"model": MODEL, "texts": [*served_store.documents[:3], "riluzole ALS survival"],
            "variants": ["SOD1", "TDP-43", "100%", "O'Brien", "ünïcödé", "absent-term"],
            "pmids": pmids}  # fmt: skip
    done = _run(slim_venv["path"], ["-c", CHILD, json.dumps(spec), str(READ_PATH)],
                cwd=slim_venv["root"], env={**_outside(), **env})  # fmt: skip
    child = json.loads(done.stdout.strip().splitlines()[-1])
    for name in [k for k in os.environ if k.startswith("CANDLEFIRE_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with open_collection(embedder=HashingEmbedder(**MODEL)) as collection:
        full = candlefire_calls(collection, spec["texts"], spec["variants"], pmids)
    assert Path(child["package"]).is_relative_to(slim_venv["path"])  # the installed package
    assert child["target"] == "pgvector/default"
    assert child["forbidden"] == []
    assert full["count"] == len(served_store.ids)
    assert any(full[f"query {i} contains"]["ids"][0] for i in range(len(spec["variants"])))
    assert differences(full, child["answers"]) == []


ROLLBACK_CHILD = """
from candlefire_pipeline.app import open_collection
from candlefire_pipeline.backends.common import BackendUnavailableError
try:
    open_collection().count()
except BackendUnavailableError as exc:
    print(exc)
"""


def test_a_slim_install_asked_to_read_chroma_says_what_to_install(slim_venv, served_store):
    """Without chromadb (the extra `chroma`), a switch naming Chroma fails by name."""
    settings = served_store.settings
    env = {**_outside(), "CANDLEFIRE_DATA_DIR": str(settings.data_dir),
           "CANDLEFIRE_PG_DSN": settings.pg_dsn, "CANDLEFIRE_PG_TABLE": settings.pg_table,
           "CANDLEFIRE_EMBED_MODEL": MODEL["model_id"],
           "CANDLEFIRE_SERVING_BACKEND": "chroma"}  # fmt: skip
    done = _run(slim_venv["path"], ["-c", ROLLBACK_CHILD], cwd=slim_venv["root"], env=env)
    assert "pip install 'candlefire_pipeline[chroma]'" in done.stdout, done.stderr[-2000:]


def test_a_slim_install_without_the_switch_file_follows_the_published_switch(
    slim_venv, served_store
):
    """A Space: no data dir shared with the pipeline; the switch is the copy published in
    Postgres, and a rollback published there reaches it."""
    settings = served_store.settings
    env = {**_outside(), "CANDLEFIRE_PG_DSN": settings.pg_dsn,
           "CANDLEFIRE_PG_TABLE": settings.pg_table, "CANDLEFIRE_EMBED_MODEL": MODEL["model_id"],
           "CANDLEFIRE_SWITCH_SOURCE": "postgres"}  # fmt: skip
    pmids = sorted({i.split("_")[0] for i in served_store.ids})[:2]
    spec = {"model": MODEL, "texts": served_store.documents[:1], "variants": ["SOD1"],
            "pmids": pmids}  # fmt: skip
    try:
        assert publish_switch(settings, settings.pg_dsn)  # the promotion deploy() wrote
        done = _run(slim_venv["path"], ["-c", CHILD, json.dumps(spec), str(READ_PATH)],
                    cwd=slim_venv["root"], env=env)  # fmt: skip
        child = json.loads(done.stdout.strip().splitlines()[-1])
        assert child["target"] == "pgvector/default" and child["forbidden"] == []
        assert child["answers"]["count"] == len(served_store.ids)
        promote_directly(settings, PINNED)  # an operator's rollback, published
        assert publish_switch(settings, settings.pg_dsn)
        done = _run(slim_venv["path"], ["-c", ROLLBACK_CHILD], cwd=slim_venv["root"], env=env)
        assert "pip install 'candlefire_pipeline[chroma]'" in done.stdout, done.stderr[-2000:]
    finally:
        promote_directly(settings)
        publish_switch(settings, settings.pg_dsn)


NO_MODEL_CHILD = """
from candlefire_pipeline.app import open_collection
collection = open_collection()
print(collection.count())
try:
    collection.query(query_texts=["riluzole"], n_results=2)
except ModuleNotFoundError as exc:
    print(exc)
"""


def test_a_slim_install_without_a_query_model_says_what_to_do(slim_venv, served_store):
    """count and get need no model; a query with neither the app's function nor the extra
    `onnx` fails by name, saying both ways."""
    settings = served_store.settings
    env = {**_outside(), "CANDLEFIRE_DATA_DIR": str(settings.data_dir),
           "CANDLEFIRE_PG_DSN": settings.pg_dsn,
           "CANDLEFIRE_PG_TABLE": settings.pg_table}  # fmt: skip
    done = _run(slim_venv["path"], ["-c", NO_MODEL_CHILD], cwd=slim_venv["root"], env=env)
    count, said = done.stdout.strip().splitlines()
    assert int(count) == len(served_store.ids)
    assert "embedding_function=" in said and "candlefire_pipeline[onnx]" in said, said
