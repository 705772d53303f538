"""The app's cold start through the collection: a fresh process imports candlefire_pipeline.app,
opens the collection from the environment and answers its first query with the real packaged
model. Measured here (the figures are printed: the import's CPU time and the modules loaded),
asserted only on what it loads and answers; the timing itself belongs to the benchmark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.parity.conformance.fixtures import FIXTURE_MODEL_ID
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.app.corpus import promote_directly

#: What a fresh process may load (stdlib only: the child loads it by path).
READ_PATH = Path(__file__).with_name("read_path.py")

CHILD = """
import json, runpy, sys, time
rules = runpy.run_path(sys.argv[2])
started, cpu = time.perf_counter(), time.process_time()
from candlefire_pipeline.app import open_collection
imported, import_cpu = time.perf_counter(), time.process_time() - cpu
at_import = set(sys.modules)
collection = open_collection()
answer = collection.query(query_texts=[sys.argv[1]], n_results=3, include=["metadatas"])
answered = time.perf_counter()
chroma = collection.target.backend == "chroma"
heavy = ("chromadb", "dagster", "torch", "sentence_transformers")
print(json.dumps({
    "import_s": imported - started, "import_cpu_s": import_cpu,
    "first_answer_s": answered - imported,
    "ids": answer["ids"], "target": str(collection.target),
    "loaded": sorted(m for m in heavy if m in sys.modules),
    "modules": [len(at_import), len(sys.modules)],
    "own_modules": [rules["own_modules"](at_import), rules["own_modules"](sys.modules)],
    "forbidden_at_import": rules["forbidden"](at_import, at_import=True),
    "forbidden_at_answer": rules["forbidden"](list(sys.modules), chroma_serves=chroma),
}))
"""
#: Loaded by the first answer on each store: Chroma only when it serves; never Dagster or torch
#: (the query model runs on ONNX Runtime).
EXPECTED_LOADED = {"pgvector": [], "chroma": ["chromadb"]}


@pytest.fixture(scope="module")
def small_deployment(tmp_path_factory, pg_dsn, conformance_rows, conformance_embedder):
    """200 conformance chunks (candle-fire's stored vectors of the real model) in both stores;
    the query model already exported to ONNX (conformance_embedder), as a deployed app keeps it."""
    root = tmp_path_factory.mktemp("cold-start")
    settings = Settings(data_dir=root, drops_dir=root / "drops", model_id=FIXTURE_MODEL_ID,
                        pg_dsn=pg_dsn, pg_table=f"cold_{uuid.uuid4().hex[:8]}")  # fmt: skip
    rows = conformance_rows.slice(0, 200)
    for name in ("chroma", "pgvector"):
        with opened_backend(name, settings) as store:
            store.replace_papers(rows)
    yield settings, rows
    with opened_backend("pgvector", settings) as store:
        store.reset()


@pytest.mark.parametrize("serving", ["pgvector", "chroma"])
def test_a_fresh_process_imports_opens_and_answers_its_first_query(small_deployment, serving):
    settings, rows = small_deployment
    settings.serving_file.unlink(missing_ok=True)
    if serving == "pgvector":
        promote_directly(settings)
    env = {**os.environ, "CANDLEFIRE_DATA_DIR": str(settings.data_dir),
           "CANDLEFIRE_PG_DSN": settings.pg_dsn, "CANDLEFIRE_PG_TABLE": settings.pg_table,
           "CANDLEFIRE_EMBED_MODEL": FIXTURE_MODEL_ID}  # fmt: skip
    for name in ("CANDLEFIRE_SERVING_BACKEND", "CANDLEFIRE_SHADOW_RATE"):
        env.pop(name, None)  # the default path: the switch decides, no shadow reads
    document = rows["document"][0].as_py()  # its own text: the chunk answers first
    done = subprocess.run([sys.executable, "-c", CHILD, document, str(READ_PATH)], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"cold start on {serving}: import {report['import_s']:.2f} s "
          f"({report['import_cpu_s']:.3f} s CPU), first answer {report['first_answer_s']:.2f} s; "
          f"modules loaded at import / first answer {report['modules']} "
          f"(the project's own {report['own_modules']})")  # fmt: skip
    assert report["target"] == f"{serving}/default"
    assert report["ids"][0][0] == rows["chunk_id"][0].as_py()
    assert report["loaded"] == EXPECTED_LOADED[serving]
    assert report["forbidden_at_import"] == []
    assert report["forbidden_at_answer"] == []
    assert report["import_s"] > 0 and report["first_answer_s"] > 0  # measured, not judged
