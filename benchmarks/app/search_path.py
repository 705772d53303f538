"""candle-fire's search path written against a chromadb Collection, as ARCHITECTURE.md ("How the
app reads", "Semantics to preserve") describes its stages: the calls the app makes, and nothing
of this project's Retriever. Run on the real Chroma collection and on the serving collection, it
must answer alike (candlefire_pipeline_tests/app/test_candlefire_search.py); the `app` benchmark
and the cold-start benchmark's open_collection() run drive the same functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.retrieval.ranking import rrf_merge
from candlefire_pipeline.retrieval.variants import term_variants

SEMANTIC_POOL, ENTITY_POOL, MAX_ENTITIES, PER_NAME, PER_VARIANT = 30, 30, 12, 10, 10
ROWS = ["documents", "metadatas", "distances"]


def parse_raw(result: dict) -> list[dict]:
    """The first query's rows as dicts: metadata, chunk id, document, similarity."""
    return [
        {**meta, "chunk_id": chunk_id, "document": document, "similarity": max(0.0, 1.0 - dist)}
        for chunk_id, document, meta, dist in zip(
            result["ids"][0], result["documents"][0], result["metadatas"][0],
            result["distances"][0], strict=True,
        )
    ]  # fmt: skip


def dedup_by_pmid(rows: list[dict]) -> list[dict]:
    """Stable sort by similarity, descending, then the first row of each PMID."""
    seen, kept = set(), []
    for row in sorted(rows, key=lambda r: -r["similarity"]):
        if row["pmid"] not in seen:
            seen.add(row["pmid"])
            kept.append(row)
    return kept


def merge_best(lists: list[list[dict]]) -> list[dict]:
    """Per PMID the row with strictly greater similarity (the first seen wins a tie)."""
    best: dict[str, dict] = {}
    for rows in lists:
        for row in rows:
            if row["pmid"] not in best or row["similarity"] > best[row["pmid"]]["similarity"]:
                best[row["pmid"]] = row
    return dedup_by_pmid(list(best.values()))


def search(collection, text: str, n: int = SEMANTIC_POOL) -> list[dict]:
    size = min(2 * n, collection.count())
    if size == 0:
        return []
    result = collection.query(query_texts=[text], n_results=size, include=ROWS)
    return dedup_by_pmid(parse_raw(result))[:n]


def search_by_entities(collection, names: list[str], n: int = ENTITY_POOL) -> list[dict]:
    lists = [
        parse_raw(collection.query(query_texts=[name], n_results=PER_NAME, include=ROWS))
        for name in names[:MAX_ENTITIES]
    ]
    return merge_best(lists)[:n]


def search_by_keyword(collection, terms: list[str], n: int = PER_VARIANT) -> list[dict]:
    lists = [
        parse_raw(
            collection.query(
                query_texts=[variant],
                n_results=n,
                include=ROWS,
                where_document={"$contains": variant},
            )
        )  # fmt: skip
        for term in terms
        if term.strip()
        for variant in term_variants(term)
    ]
    return merge_best(lists)


def grounded_in_corpus(collection, term: str) -> bool:
    return any(
        collection.query(
            query_texts=[variant],
            n_results=1,
            include=["metadatas"],
            where_document={"$contains": variant},
        )["ids"][0]  # fmt: skip
        for variant in term_variants(term)
    )


def grounded_in_abstract(collection, term: str) -> bool:
    return any(
        collection.get(
            where={"chunk_index": {"$eq": 0}},
            where_document={"$contains": variant},
            limit=1,
            include=["metadatas"],
        )["ids"]  # fmt: skip
        for variant in term_variants(term)
    )


def get_paper(collection, pmid: str) -> dict | None:
    """The paper's abstract chunk (its metadata and document)."""
    where = {"$and": [{"pmid": {"$eq": pmid}}, {"chunk_index": {"$eq": 0}}]}
    found = collection.get(where=where, include=["documents", "metadatas"])
    if not found["ids"]:
        return None
    return {**found["metadatas"][0], "document": found["documents"][0]}


def paper_texts_for_pmids(collection, pmids: list[str]) -> dict[str, str]:
    """Per PMID: its abstract chunk's text, then all its chunks joined, in the order returned."""
    if not pmids:
        return {}
    found = collection.get(where={"pmid": {"$in": pmids}}, include=["documents", "metadatas"])
    abstract: dict[str, str] = {}
    chunks: dict[str, list[str]] = {}
    for document, meta in zip(found["documents"], found["metadatas"], strict=True):
        chunks.setdefault(meta["pmid"], []).append(document)
        if meta["chunk_index"] == 0:
            abstract.setdefault(meta["pmid"], document)
    return {p: abstract.get(p, "") + "\n\n" + "\n\n".join(chunks[p]) for p in chunks}


@dataclass
class Answer:
    """Everything one request reads through the collection."""

    search: list[dict]
    entities: list[dict]
    keyword: list[dict]
    grounding: dict[str, tuple[bool, bool]]
    fused: list[dict]
    texts: dict[str, str]
    paper: dict | None


def answer(collection, text: str, entities: list[str], terms: list[str]) -> Answer:
    """One request: the three stages, grounding of each keyword term, RRF, the cited papers'
    texts and the first one's abstract."""
    keyword_terms = list(dict.fromkeys([*entities, *terms]))
    stages = (search(collection, text), search_by_entities(collection, entities),
              search_by_keyword(collection, keyword_terms))  # fmt: skip
    grounding = {
        term: (grounded_in_corpus(collection, term), grounded_in_abstract(collection, term))
        for term in keyword_terms
    }
    fused = rrf_merge(list(stages))
    pmids = [row["pmid"] for row in fused]
    paper = get_paper(collection, pmids[0]) if pmids else None
    return Answer(*stages, grounding, fused, paper_texts_for_pmids(collection, pmids), paper)
