"""One cold start, in a fresh process: what an app process does from exec to its first answer.

Phases, each stamped with time.time() (the parent stamped the exec): imports (the reader and the
settings), fetch (copy the store's files from the "dataset" location into the app's data dir,
as candle-fire's app.py:_ensure_data does for Chroma; nothing for pgvector), model load (the
query embedder), store open (ServingReader.retriever(): the switch read, the backend opened, its
client library imported) and first answer (one full retrieve()). Prints one JSON line.

Run by the cold-start benchmark (cold_start/first_answer.py), e.g.:
  python -m benchmarks.cold_start.child --store chroma --dataset DIR --request '{...}'
"""

from __future__ import annotations

import time

STARTED = time.time()

import argparse  # noqa: E402  (the first stamp comes before any import)
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

from benchmarks.cold_start.held import app_bytes  # noqa: E402
from candlefire_pipeline.backends.factory import open_backend  # noqa: E402
from candlefire_pipeline.operations.reader import ServingReader  # noqa: E402
from candlefire_pipeline.settings import Settings  # noqa: E402

IMPORTED = time.time()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", choices=("chroma", "pgvector", "qdrant"), required=True)
    parser.add_argument("--dataset", type=Path, help="the store's files to copy (chroma, qdrant)")
    parser.add_argument("--request", required=True, help="JSON: query, entities, terms")
    args = parser.parse_args()
    settings = Settings.from_env()
    stamps = {"started": STARTED, "imported": IMPORTED}
    if args.dataset is not None:
        target = settings.chroma_path if args.store == "chroma" else settings.qdrant_path
        shutil.copytree(args.dataset, target)
    stamps["fetched"] = time.time()
    from candlefire_pipeline.embedding import embedder_for

    embedder = embedder_for(settings, "query")
    stamps["model"] = time.time()
    # Qdrant is not a servable store: the reader opens it through its opener hook
    opener = (lambda _name, s: open_backend("qdrant", s)) if args.store == "qdrant" else None
    reader = ServingReader(settings, embedder=embedder, **({"opener": opener} if opener else {}))
    retriever = reader.retriever()
    stamps["opened"] = time.time()
    request = json.loads(args.request)
    answer = retriever.retrieve(request["query"], request["entities"], request["terms"])
    stamps["answered"] = time.time()
    import psutil

    print(
        json.dumps(
            {
                "store": args.store,
                "backend": reader.backend_name,
                "stamps": stamps,
                "papers": len(answer.pmids),
                "pmids": answer.pmids,
                "rss": psutil.Process(os.getpid()).memory_info().rss,
                "store_bytes": app_bytes(settings),
            }
        )
    )
    reader.close()


if __name__ == "__main__":
    main()
