"""The import: the app's rows as the ledger's first batches, every written store seeded bit for
bit, idempotent, finished after a crash, and replaced by paper by later drops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.corpus.ledger import diff_inventory, expected_chunks
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.adoption.importer import run_import
from candlefire_pipeline.operations.adoption.manifest import import_state
from candlefire_pipeline_tests.adoption import scenario
from candlefire_pipeline_tests.adoption.app_indexer import app_rows
from candlefire_pipeline_tests.operations.batches import apply


def pg_rows(settings) -> list[tuple[str, str, str, np.ndarray]]:
    """(chunk id, document, content hash, vector) in the table's insertion order."""
    with opened_backend("pgvector", settings) as store:
        rows = store.conn.execute(
            f"SELECT chunk_id, document, content_hash, embedding::real[] FROM {store.names.table} "
            "ORDER BY seq"
        ).fetchall()
    return [(c, d, h, np.asarray(v, dtype=np.float32)) for c, d, h, v in rows]


def chroma_ids(settings) -> set[str]:
    with opened_backend("chroma", settings) as store:
        return set(store.chunk_hashes())


def with_parts(settings, part_rows: int):
    return replace(settings, app_collection=replace(settings.app_collection, part_rows=part_rows))


@pytest.fixture
def deployed(tmp_path, pg_dsn):
    deployment = scenario.deployment(tmp_path, pg_dsn)
    yield deployment
    with opened_backend("pgvector", deployment.settings) as store:
        store.reset()


def test_the_import_seeds_every_store_bit_for_bit_in_the_apps_order(deployed, tmp_path):
    settings = with_parts(deployed.settings, 3)  # several parts; A2's chunks are apart
    before = scenario.folder_checksum(deployed.app_folder)
    embedder = embedder_for(settings, "bulk")
    result = run_import(settings, embedder)
    assert scenario.folder_checksum(deployed.app_folder) == before
    app = app_rows(deployed.app_folder, tmp_path)
    held = pg_rows(settings)
    assert [row[0] for row in held] == [row[0] for row in app]  # the app's insertion order
    for (cid, doc, _, vector), (app_id, app_doc, app_vector) in zip(held, app, strict=True):
        assert (cid, doc) == (app_id, app_doc)
        assert vector.tobytes() == app_vector.tobytes(), cid
    assert chroma_ids(settings) == {row[0] for row in app}
    assert len(result.manifest.parts) >= 3 and all(k.startswith("+app-01-") for k in
                                                    result.manifest.keys)  # fmt: skip
    state = import_state(settings, result.manifest.fingerprint)
    assert state["complete"] and state["stores"] == {
        "pgvector": len(result.manifest.keys),
        "chroma": len(result.manifest.keys),
    }
    # Chroma part by part: 10 rows, A2's bare chunk written again with its section chunks (a
    # later part, same place); the empty pgvector table as one first build: each chunk once
    assert {s: f["rows_written"] for s, f in result.applied.items()} == {
        "chroma": 11,
        "pgvector": 10,
    }
    # the ledger holds exactly what the stores hold
    expected = expected_chunks(settings.batches_dir)
    assert diff_inventory(expected, {c: h for c, _, h, _ in held}).clean
    again = run_import(settings, embedder)  # idempotent: nothing is written twice
    assert {f["rows_written"] for f in again.applied.values()} == {0}
    assert again.manifest.keys == result.manifest.keys
    assert scenario.folder_checksum(deployed.app_folder) == before


def test_a_drop_after_the_import_replaces_by_paper(deployed):
    settings = deployed.settings
    run_import(settings, embedder_for(settings, "bulk"))
    scenario.write_drops(settings)
    for name in settings.stores:
        with opened_backend(name, settings) as store:
            for key in ("drop-1", "drop-2a", "drop-2b"):
                apply(store, settings.batches_dir, key)
    held = {cid: (doc, h) for cid, doc, h, _ in pg_rows(settings)}
    assert "A2" not in held and {"A2_s0", "A2_s1", "A2_s2"} <= set(held)  # bare chunk gone
    assert "A3" not in held  # deleted by drop-2b
    assert "v2 abstract of A4" in held["A4"][0]
    expected = expected_chunks(settings.batches_dir)
    assert diff_inventory(expected, {c: h for c, (_, h) in held.items()}).clean
    assert diff_inventory(expected, chroma_ids_hashes(settings)).clean


def chroma_ids_hashes(settings) -> dict[str, str]:
    with opened_backend("chroma", settings) as store:
        return store.chunk_hashes()


def test_an_import_after_the_drops_keeps_every_drops_version(deployed):
    settings = deployed.settings
    scenario.write_drops(settings)
    for name in settings.stores:
        with opened_backend(name, settings) as store:
            for key in ("drop-1", "drop-2a", "drop-2b"):
                apply(store, settings.batches_dir, key)
    result = run_import(settings, embedder_for(settings, "bulk"))
    # every paper of the app is in a drop: each import part is superseded, nothing overwritten
    assert {f["rows_written"] for f in result.applied.values()} == {0}
    expected = expected_chunks(settings.batches_dir)
    assert diff_inventory(expected, {c: h for c, _, h, _ in pg_rows(settings)}).clean
    assert diff_inventory(expected, chroma_ids_hashes(settings)).clean


CRASH = """
import os, signal, sys
from dataclasses import replace
from pathlib import Path
from candlefire_pipeline.embedding import embedder_for
from candlefire_pipeline.operations.adoption import apply, importer
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.adoption import scenario
from candlefire_pipeline_tests.adoption.app_indexer import app_rows

deployment = scenario.deployment(Path(sys.argv[1]), sys.argv[2])
settings = replace(deployment.settings, pg_table=sys.argv[3],
                   app_collection=replace(deployment.settings.app_collection, part_rows=3))
from candlefire_pipeline.backends.pg import bulk
where, at = sys.argv[4].split(":")
module, name = {"chroma_part": (apply, "apply_batch"), "pg_copy": (bulk, "copy_rows"),
                "pg_markers": (apply, "_record"), "part_files": (importer, "_write_files")}[where]
real, calls = getattr(module, name), [0]

def dying(*args, **kwargs):
    calls[0] += 1
    if calls[0] == int(at) and where == "part_files":  # its chunks file torn in the folder
        real(*args, **kwargs)
        torn = args[0] / "chunks.parquet"
        torn.write_bytes(torn.read_bytes()[: torn.stat().st_size // 2])
        os.kill(os.getpid(), signal.SIGKILL)
    if calls[0] == int(at):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)

setattr(module, name, dying)
importer.run_import(settings, embedder_for(settings, "bulk"))
"""


#: a Chroma part applied (the second of four), the pgvector first build mid-COPY (its third part),
#: the first build committed but its ledger markers not yet written (found by the crash drill's
#: adopt stage: the re-run applied the parts one by one over the loaded table, and a paper cut
#: across two parts was replaced by its first part's chunks, then got the rest back at the end),
#: a part's files torn in its hidden folder before the rename (also the drill's: the re-run read
#: the torn file as a batch of the ledger)
@pytest.mark.parametrize("killed_at", ["chroma_part:2", "pg_copy:3", "pg_markers:1",
                                       "part_files:2"])  # fmt: skip
def test_an_import_killed_midway_and_run_again_gives_the_same_tables(deployed, tmp_path, killed_at):
    settings = with_parts(deployed.settings, 3)
    crash_root = tmp_path / "crashed"
    table = f"crash_{os.urandom(4).hex()}"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    done = subprocess.run([sys.executable, "-c", CRASH, str(crash_root), settings.pg_dsn, table,
                           str(killed_at)], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    crashed = replace(scenario.deployment(crash_root, settings.pg_dsn).settings, pg_table=table)
    crashed = with_parts(crashed, 3)
    try:
        assert not import_state(crashed, _fingerprint(crashed))["complete"]
        hidden = [d.name for d in crashed.batches_dir.iterdir() if d.name.startswith(".")]
        assert bool(hidden) == killed_at.startswith("part_files"), hidden
        run_import(crashed, embedder_for(crashed, "bulk"))
        assert not [d for d in crashed.batches_dir.iterdir() if d.name.startswith(".")]
        run_import(settings, embedder_for(settings, "bulk"))
        assert _comparable(pg_rows(crashed)) == _comparable(pg_rows(settings))
        assert chroma_ids_hashes(crashed) == chroma_ids_hashes(settings)
    finally:
        with opened_backend("pgvector", crashed) as store:
            store.reset()


def _fingerprint(settings) -> str:
    from candlefire_pipeline.operations.adoption.source import current_fingerprint

    return current_fingerprint(settings.app_collection)


def _comparable(rows) -> list[tuple]:
    return [(c, d, h, v.tobytes()) for c, d, h, v in rows]
