"""What the app's read path may load, and candle-fire's call shapes, for the fresh processes of
test_cold_start.py and test_slim_install.py.

Standard library only: a child process loads this file with `runpy.run_path` (no package import,
so the slim venv's child never sees the source tree), and the test process imports it.
"""

from __future__ import annotations

#: Third-party modules the read path never loads (chromadb only when Chroma serves).
FORBIDDEN_MODULES = (
    "pyarrow", "pandas", "cloudpickle", "defusedxml", "ahocorasick", "dagster", "torch",
    "sentence_transformers", "ray", "qdrant_client", "matplotlib", "chromadb",
)  # fmt: skip
#: The project's own code the read path never loads: the pipeline's side (parity, ingestion,
#: adoption, indexing, conformance, Dagster, the embedding stage and its cache and executor);
#: the shadow's records and worker only with CANDLEFIRE_SHADOW_RATE > 0.
FORBIDDEN_PACKAGES = (
    "candlefire_pipeline.parity", "candlefire_pipeline.corpus",
    "candlefire_pipeline.operations.adoption", "candlefire_pipeline.operations.shadow",
    "candlefire_pipeline.operations.indexing", "candlefire_pipeline.operations.conformance",
    "candlefire_pipeline.defs", "candlefire_pipeline.embedding.stage",
    "candlefire_pipeline.embedding.cache", "candlefire_pipeline.embedding.ray_executor",
)  # fmt: skip
#: What `import candlefire_pipeline.app` alone must not load either: the collection's own
#: dependencies load when a collection is opened.
HEAVY_AT_IMPORT = ("numpy", "psycopg", "pgvector", "candlefire_pipeline.app.collection")


def forbidden(modules, chroma_serves: bool = False, at_import: bool = False) -> list[str]:
    """The forbidden modules / packages among `modules` (names as in sys.modules)."""
    names = [m for m in FORBIDDEN_MODULES if not (chroma_serves and m == "chromadb")]
    names += FORBIDDEN_PACKAGES
    if at_import:
        names += HEAVY_AT_IMPORT
    return sorted({n for n in names for m in modules if m == n or m.startswith(n + ".")})


def own_modules(modules) -> int:
    """How many of `modules` are the project's own."""
    return sum(1 for m in modules if m.split(".")[0] == "candlefire_pipeline")


def candlefire_calls(collection, texts, variants, pmids) -> dict:
    """The answers to candle-fire's call shapes (rag/retriever.py and the research agent), as
    plain JSON-able data keyed by the call."""
    docs = ["documents", "metadatas", "distances"]
    out = {"count": collection.count()}
    for i, text in enumerate(texts):
        out[f"query {i}"] = collection.query(query_texts=[text], n_results=8, include=docs)
    for i, variant in enumerate(variants):
        text, contains = texts[i % len(texts)], {"$contains": variant}
        out[f"query {i} contains"] = collection.query(
            query_texts=[text], n_results=8, where_document=contains, include=docs
        )
        out[f"grounding {i}"] = collection.query(
            query_texts=[text], n_results=1, where_document=contains, include=["metadatas"]
        )
        out[f"abstract {i}"] = collection.get(
            where={"chunk_index": {"$eq": 0}}, where_document=contains, limit=1,
            include=["metadatas"],
        )  # fmt: skip
    out["papers"] = collection.get(
        where={"pmid": {"$in": list(pmids)}}, include=["documents", "metadatas"]
    )
    for pmid in pmids:
        out[f"abstract of {pmid}"] = collection.get(
            where={"$and": [{"pmid": {"$eq": pmid}}, {"chunk_index": {"$eq": 0}}]},
            include=["documents", "metadatas"],
        )
    return {call: _plain(answer) for call, answer in out.items()}


def _plain(answer):
    """An answer with numpy values as Python ones (JSON), keys absent when None."""
    if isinstance(answer, dict):
        return {k: _plain(v) for k, v in answer.items() if v is not None}
    if isinstance(answer, list | tuple):
        return [_plain(v) for v in answer]
    if hasattr(answer, "tolist"):
        return answer.tolist()
    return answer


def differences(expected: dict, got: dict, tolerance: float = 1e-6) -> list[str]:
    """Where two runs of candlefire_calls differ: equal ids, documents and metadatas, distances
    within `tolerance` (another process, another build of numpy may round the last bit)."""
    found = [f"calls {sorted(set(expected) ^ set(got))}"] if set(expected) != set(got) else []
    for call in sorted(set(expected) & set(got)):
        a, b = expected[call], got[call]
        if call == "count" or set(a) != set(b):
            found += [call] if a != b else []
            continue
        for key in sorted(set(a) - {"distances"}):
            if a[key] != b[key]:
                found.append(f"{call}: {key}")
        if "distances" in a and not _near(a["distances"], b["distances"], tolerance):
            found.append(f"{call}: distances")
    return found


def _near(a, b, tolerance: float) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_near(x, y, tolerance) for x, y in zip(a, b, strict=True))
    return abs(a - b) <= tolerance
