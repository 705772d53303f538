"""The drill's adoption stage: `candlefire adopt import` of an app-style Chroma collection into a
pgvector table of its own, killed anywhere (reading and staging, publishing the parts, the
table's first build, the ledger markers after it), then run again as the operator would.

Converged: the import complete, the table holding the collection's rows (ids, documents, vectors
bit for bit) each once in the collection's order, and the generic checks of checks.py.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
from psycopg import sql

from candlefire_pipeline.backends.factory import build_backend
from candlefire_pipeline.backends.pg import phrase
from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.embedding import HashingEmbedder, embedder_for
from candlefire_pipeline.operations.adoption.importer import run_import
from candlefire_pipeline.operations.adoption.manifest import import_state, imports_dir
from candlefire_pipeline.operations.adoption.source import current_fingerprint
from candlefire_pipeline.settings import Settings
from candlefire_pipeline_tests.adoption.app_indexer import app_rows, index_papers
from candlefire_pipeline_tests.operations.batches import paper
from candlefire_pipeline_tests.reliability.drill import checks

TABLE = "drill_adopt"
#: Rows per imported part: several parts, so a kill can land between two publishes.
PART_ROWS = 150
#: The app's model: hashing vectors wide enough that the HNSW check's neighbours do not tie.
EMBEDDER = HashingEmbedder(dim=64, model_id="hashing-v1:64")
VOCABULARY = (
    "motor neuron degeneration SOD1 TDP-43 C9orf72 FUS riluzole edaravone tofersen astrocyte "
    "microglia axonal transport stress granule autophagy cohort survival biomarker neurofilament "
    "spinal cord cortex mouse patient trial"
).split()
NO_PHRASE = "the phrase index is not valid"
#: Words of the app's documents the trigram check searches for.
WORDS = ["microglia", "SOD1", "title", "axonal"]


def build_app_collection(folder: Path, papers: int, seed: int) -> Path:
    """An app folder as candle-fire's indexer writes it: abstract-only papers and papers with
    full-text sections (several chunks each), hashing vectors of the pipeline's model. Each
    abstract draws its own words: near-identical texts would tie in the HNSW check's top 10."""
    rng = random.Random(seed)

    def text() -> str:
        return " ".join(rng.choices(VOCABULARY, k=12))

    records = [paper(f"{7_000_000 + i}", entity_names=["SOD1"], mesh_terms=["ALS"],
                     abstract=text(), full_text="\n".join(f"[Part {j}]\n{text()}"
                                                          for j in range(i % 3 * 2)) or None)
               for i in range(papers)]  # fmt: skip
    index_papers(folder, records, EMBEDDER.embed)
    return folder


def settings_of(config: dict) -> Settings:
    """The deployment the import runs in: its own data folder and table; pgvector written only
    (the drill's subject; Chroma writes would be the worker's alone, as in unretire)."""
    data = Path(config["adopt_data"])
    settings = Settings(
        data_dir=data, drops_dir=data / "drops", model_id=EMBEDDER.model_id, pg_dsn=config["dsn"],
        pg_table=config["table"], stores=("pgvector",),
    ).with_data_dir(data)  # fmt: skip
    app = replace(settings.app_collection, path=Path(config["app_folder"]), part_rows=PART_ROWS)
    return replace(settings, app_collection=app)


def prepare(config: dict) -> dict:
    """A fresh deployment: no ledger, no import state, the table dropped."""
    shutil.rmtree(config["adopt_data"], ignore_errors=True)
    store = open_store(config)
    try:
        store.reset()
    finally:
        store.close()
    return config


def open_store(config: dict):
    return build_backend("pgvector", config["dsn"], table=config["table"])


def adopt_step(config: dict, announce=lambda: None) -> None:
    """What `candlefire adopt import` runs (cli_adopt.py)."""
    settings = settings_of(config)
    embedder = embedder_for(settings, "bulk")
    announce()
    run_import(settings, embedder)


def left(config: dict) -> str:
    """What the killed import left on disk, to name where it was when Postgres shows nothing
    running: its manifest's state, the parts published and those applied."""
    settings = settings_of(config)
    manifests = sorted(imports_dir(settings).glob("*.json"))
    if not manifests:
        return "; left: no manifest"
    manifest = json.loads(manifests[0].read_text())
    keys = [part["key"] for part in manifest["parts"]]
    published = sum((settings.batch_dir(k) / "papers.parquet").is_file() for k in keys)
    applied = len(set(keys) & set(StoreLedger(settings.batches_dir, "pgvector").applied()))
    return (f"; left: manifest {manifest['state']}, {published}/{len(keys)} parts published, "
            f"{applied} applied")  # fmt: skip


def app_side(folder: Path, scratch: Path) -> list[tuple[str, str, bytes]]:
    """(id, document, vector bytes) of the app's collection, in its order (read from a copy)."""
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    rows = app_rows(folder, scratch)
    return [(cid, doc, np.asarray(v, np.float32).tobytes()) for cid, doc, v in rows]


def adopt_failures(config: dict, expected: list[tuple[str, str, bytes]],
                   rng: np.random.Generator) -> tuple[list[str], dict]:  # fmt: skip
    """(failures, figures) after the import was run again."""
    settings = settings_of(config)
    state = import_state(settings, current_fingerprint(settings.app_collection))
    failures = [] if state["complete"] else [f"import not complete: {state['summary']}"]
    store = open_store(config)
    try:
        name = store.names.ident().as_string(store.conn)
        if store.conn.execute("SELECT to_regclass(%s)", [name]).fetchone()[0] is None:
            return [*failures, f"the table {name} does not exist"], {}
        query = sql.SQL("SELECT chunk_id, document, embedding::real[] FROM {t} ORDER BY seq")
        held = [(c, d, np.asarray(v, np.float32).tobytes())
                for c, d, v in store.conn.execute(query.format(t=store.names.ident()))]  # fmt: skip
        failures += _table_failures(held, expected)
        failures += checks.ledger_failures(store, settings.batches_dir)
        cache, audited = checks.term_cache_failures(store)
        # an import never builds the phrase index (the next drop's store step does): absent is
        # what a finished import leaves; an invalid one left by a crash would still fail
        indexes = checks.index_failures(store)
        failures += cache + [f for f in indexes if f != NO_PHRASE or _phrase_invalid(store)]
        ann, recall = checks.ann_failures(store, rng)
        failures += ann + checks.trigram_failures(store, WORDS)
    finally:
        store.close()
    return failures, {"audited": audited, "recall": round(recall, 3), "rows": len(held)}


def _phrase_invalid(store) -> bool:
    return phrase.state(store.conn, store.names, store.substring_mode) != "absent"


def _table_failures(held: list[tuple], expected: list[tuple]) -> list[str]:
    """The table against the collection: each id once, in its order, same text and vector."""
    ids = [row[0] for row in held]
    twice = len(ids) - len(set(ids))
    failures = [f"{twice} chunks held twice"] if twice else []
    want = {row[0]: row for row in expected}
    lost, extra = want.keys() - set(ids), set(ids) - want.keys()
    for label, found in (("lost", lost), ("not in the app's collection", extra)):
        if found:
            failures.append(f"{len(found)} chunks {label} (e.g. {sorted(found)[:3]})")
    differ = [row[0] for row in held if row[0] in want and row != want[row[0]]]
    if differ:
        failures.append(f"{len(differ)} chunks differ from the app's (e.g. {differ[:3]})")
    if not failures and ids != [row[0] for row in expected]:
        failures.append("the table's order is not the collection's")
    return failures
