"""One measured operation in a fresh process (its peak RSS is its own); one JSON line.

floor FOLDER: a bare paginated get of every row (documents, metadatas, embeddings) of a copy;
add FOLDER: those pages added as they are to a new collection (Chroma's own write rate);
report FOLDER DATA_DIR: `candlefire adopt report`'s build_report;
import FOLDER DATA_DIR DSN TABLE: run_import into pgvector and Chroma.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import chromadb
from chromadb.config import Settings as ChromaSettings

from benchmarks.adopt.collection import COLLECTION, MODEL
from candlefire_pipeline.operations.adoption.importer import run_import
from candlefire_pipeline.operations.adoption.report import build_report
from candlefire_pipeline.settings import AppCollectionSettings, Settings


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def settings(folder: str, data_dir: str, dsn: str | None = None, table: str = "adopt") -> Settings:
    data = Path(data_dir)
    base = Settings(data_dir=data, drops_dir=data / "drops", model_id=MODEL.model_id,
                    pg_dsn=dsn, pg_table=table, stores=("pgvector", "chroma"))  # fmt: skip
    return replace(base, app_collection=replace(base.app_collection, path=Path(folder)))


def floor(folder: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="adopt-floor-") as scratch:
        copy = Path(scratch) / "app"
        shutil.copytree(folder, copy)  # chromadb opens only a copy, as the adoption does
        client = chromadb.PersistentClient(
            str(copy), settings=ChromaSettings(anonymized_telemetry=False)
        )
        collection = client.get_collection(COLLECTION, embedding_function=None)
        started, rows = time.perf_counter(), 0
        page = AppCollectionSettings().page_rows  # the adoption's own page size
        while True:
            got = collection.get(limit=page, offset=rows,
                                 include=["documents", "metadatas", "embeddings"])  # fmt: skip
            if not got["ids"]:
                break
            rows += len(got["ids"])
        seconds = time.perf_counter() - started
        client.close()
    return {"rows": rows, "seconds": seconds}


def add(folder: str) -> dict:
    """The floor's pages, each added as it is to a new cosine collection beside it."""
    with tempfile.TemporaryDirectory(prefix="adopt-add-") as scratch:
        copy = Path(scratch) / "app"
        shutil.copytree(folder, copy)
        client = chromadb.PersistentClient(
            str(copy), settings=ChromaSettings(anonymized_telemetry=False)
        )
        source = client.get_collection(COLLECTION, embedding_function=None)
        target = client.create_collection("bare_add", configuration={"hnsw": {"space": "cosine"}},
                                          embedding_function=None)  # fmt: skip
        page, rows, seconds = client.get_max_batch_size(), 0, 0.0
        while True:
            got = source.get(limit=page, offset=rows,
                             include=["documents", "metadatas", "embeddings"])  # fmt: skip
            if not got["ids"]:
                break
            started = time.perf_counter()  # the add alone, not the read
            target.add(ids=got["ids"], documents=got["documents"], metadatas=got["metadatas"],
                       embeddings=got["embeddings"])  # fmt: skip
            seconds += time.perf_counter() - started
            rows += len(got["ids"])
        client.close()
    return {"rows": rows, "seconds": seconds}


def report(folder: str, data_dir: str) -> dict:
    started = time.perf_counter()
    done, _ = build_report(settings(folder, data_dir), MODEL, emit=lambda line: None)
    return {"rows": done.rows, "seconds": time.perf_counter() - started, "parts": done.seconds,
            "model": done.model["verdict"]}  # fmt: skip


def imported(folder: str, data_dir: str, dsn: str, table: str) -> dict:
    started = time.perf_counter()
    result = run_import(settings(folder, data_dir, dsn, table), MODEL, emit=lambda line: None)
    return {"rows": result.report.rows, "seconds": time.perf_counter() - started,
            "parts": result.seconds, "applied": result.applied,
            "complete": result.report.imported["complete"]}  # fmt: skip


def main(argv: list[str]) -> None:
    verb, *rest = argv
    result = {"floor": floor, "add": add, "report": report, "import": imported}[verb](*rest)
    print(json.dumps({**result, "peak_rss": peak_rss()}))


if __name__ == "__main__":
    main(sys.argv[1:])
