"""Each `candlefire` verb prints only its own output: library logs from WARNING up, no Python
warnings (both in full with --verbose). Run as an operator runs them: a fresh process each,
the embedded Postgres under the data dir, a new Dagster home, XDG_RUNTIME_DIR unset."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from candlefire_pipeline.backends.pg.backend import PgVectorBackend
from candlefire_pipeline.backends.pg.server import EmbeddedPostgres
from candlefire_pipeline.corpus.demo import write_demo_drops
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.fixtures_backends import pg_data_root

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Lines no verb may print without --verbose (library logs, warnings, their continuations).
NOISE = ("INFO ", "DEBUG ", "Warning", "warnings.warn", "pgserver", "alembic", "return Path(")

#: verb -> (arguments, exit code, a line of its own output)
VERBS = {
    "status": (["status"], 0, "serving backend: chroma"),
    "query": (["query", "SOD1 in ALS", "--term", "SOD1", "--backend", "pgvector"], 0,
              "term 'SOD1': grounded in corpus=False, in abstract=False"),
    "query --backend serving": (["query", "SOD1 in ALS"], 0, "serving backend: chroma (as the"),
    "register-drops": (["register-drops"], 0, "3 drop partitions registered"),
    "rollback": (["rollback", "--reason", "drill"], 0, "serving backend: chroma - chroma (PINNED"),
    "promote": (["promote", "--reason", "go"], 1, "candlefire promote: refused"),
    "promote --generation": (["promote", "--generation", "int8", "--reason", "go"], 1,
                             "candlefire promote: refused, nothing changed: no generation named"),
    "repair": (["repair", "--store", "chroma"], 0, "the store matches the ledger"),
    "create-reader-role": (["create-reader-role", "--role", "quiet_reader"], 0,
                           "role 'quiet_reader' can read"),
    "fetch-pubmed": (["fetch-pubmed", "--query", "SOD1", "--since", "2025-01-01",
                      "--batch-size", "0"], 2, "candlefire fetch-pubmed: failed: batch_size"),
    "generation list": (["generation", "list"], 0, "default (default) ["),
    "generation gc": (["generation", "gc"], 0, "nothing to drop"),
}  # fmt: skip


@pytest.fixture(scope="module")
def operator_env() -> Iterator[dict[str, str]]:
    with pg_data_root() as root:
        home = root / "dagster_home"
        home.mkdir()
        shutil.copy(REPO_ROOT / "dagster.yaml", home / "dagster.yaml")
        write_demo_drops(root / "data" / "drops")
        env = {k: v for k, v in os.environ.items() if not k.startswith("CANDLEFIRE_")}
        env.pop("XDG_RUNTIME_DIR", None)
        env |= {"CANDLEFIRE_DATA_DIR": str(root / "data"), "DAGSTER_HOME": str(home),
                "CANDLEFIRE_EMBED_MODEL": "hashing-v1"}  # fmt: skip
        server = EmbeddedPostgres(root / "data" / "pg")
        try:
            # the table a reader role is granted (an apply creates it; the verbs need no data)
            settings = Settings(root / "data", root / "data" / "drops", model_id="hashing-v1")
            embedder = embedder_for(settings, "query")
            with closing(PgVectorBackend(server.dsn)) as store:
                store.ensure_schema(embedder.model_id, embedder.dim)
            yield env
        finally:
            server.stop()


def candlefire(env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "candlefire_pipeline.cli", *args],
        env=env, capture_output=True, text=True, cwd=REPO_ROOT,
    )  # fmt: skip
    return done.returncode, (done.stdout + done.stderr).splitlines()


@pytest.mark.parametrize("verb", list(VERBS))
def test_a_verb_prints_only_its_own_output(operator_env, verb):
    args, code, own_line = VERBS[verb]
    returncode, lines = candlefire(operator_env, *args)
    assert returncode == code, lines
    assert any(line.strip().startswith(own_line) for line in lines), lines
    assert [line for line in lines if any(noise in line for noise in NOISE)] == []


def test_verbose_shows_the_library_logs_the_default_hides(operator_env):
    """The other side of the filter: the same verb with --verbose shows what was held back."""
    returncode, lines = candlefire(operator_env, "status", "--verbose")
    assert returncode == 0
    assert any(line.startswith("INFO ") for line in lines), lines
    assert any("RuntimeDirWarning" in line for line in lines), lines
