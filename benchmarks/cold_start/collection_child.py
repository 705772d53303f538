"""One cold start of the flipped candle-fire app, in a fresh process: `open_collection()` on the
store the switch names, then candle-fire's search path (benchmarks/app/search_path.py) for one
request. The phases are child.py's, stamped alike: imports (candlefire_pipeline.app and the
app's search path), fetch (nothing: the collection downloads no store), model load (the query
embedder, as the collection's first query would load it), store open (open_collection() and its
first call, count(): the switch read, the connection, the table's checks) and first answer (the
search path's calls). Prints one JSON line, with the heavy modules the process loaded.

Run by the cold-start benchmark (cold_start/first_answer.py), e.g.:
  python -m benchmarks.cold_start.collection_child --request '{...}'
"""

from __future__ import annotations

import time

STARTED = time.time()

import argparse  # noqa: E402  (the first stamp comes before any import)
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

from benchmarks.app import search_path  # noqa: E402
from benchmarks.cold_start.held import app_bytes  # noqa: E402
from candlefire_pipeline.app import open_collection  # noqa: E402
from candlefire_pipeline.settings import Settings  # noqa: E402

IMPORTED = time.time()
#: Modules the flipped app must not need while pgvector serves (docs/APP.md).
HEAVY = ("chromadb", "dagster", "torch", "sentence_transformers")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--request", required=True, help="JSON: query, entities, terms")
    args = parser.parse_args()
    settings = Settings.from_env()
    stamps = {"started": STARTED, "imported": IMPORTED, "fetched": time.time()}
    from candlefire_pipeline.embedding import embedder_for

    embedder = embedder_for(settings, "query")
    stamps["model"] = time.time()
    collection = open_collection(settings, embedder)
    collection.count()
    stamps["opened"] = time.time()
    request = json.loads(args.request)
    answer = search_path.answer(collection, request["query"], request["entities"],
                                request["terms"])  # fmt: skip
    stamps["answered"] = time.time()
    import psutil

    pmids = [row["pmid"] for row in answer.fused]
    print(
        json.dumps(
            {
                "store": collection.target.backend,
                "backend": collection.target.backend,
                "stamps": stamps,
                "papers": len(pmids),
                "pmids": pmids,
                "rss": psutil.Process(os.getpid()).memory_info().rss,
                "store_bytes": app_bytes(settings),
                "loaded": sorted(m for m in HEAVY if m in sys.modules),
            }
        )
    )
    collection.close()


if __name__ == "__main__":
    main()
