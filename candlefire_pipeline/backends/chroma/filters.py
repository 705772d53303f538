"""Chroma `where` and `where_document` documents for the protocol's Filter and variants."""

from __future__ import annotations

from dataclasses import replace

from candlefire_pipeline.backends.base import Filter

#: The most pmids in one `$in`: Chroma binds each value as an SQLite variable and refuses a
#: statement with more than 32,766 ("too many SQL variables"; a 50% pmids filter at 250k chunks).
PMID_PAGE = 5_000


def chroma_where(where: Filter) -> dict | None:
    """A Chroma `where` document for a Filter (None when nothing filters)."""
    clauses: list[dict] = []
    if where.pmids is not None:
        clauses.append({"pmid": {"$in": list(where.pmids)}})
    if where.abstract_only:
        clauses.append({"chunk_index": {"$eq": 0}})
    if where.min_year is not None:
        clauses.append({"year": {"$gte": int(where.min_year)}})
    if where.max_year is not None:
        clauses.append({"year": {"$lte": int(where.max_year)}})
    if where.has_full_text is not None:
        clauses.append({"has_full_text": {"$eq": bool(where.has_full_text)}})
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def chroma_wheres(where: Filter) -> list[dict | None]:
    """Where documents covering a Filter, its distinct pmids split into pages of PMID_PAGE."""
    if where.pmids is None:
        return [chroma_where(where)]
    wanted = sorted(set(where.pmids))
    pages = (tuple(wanted[i : i + PMID_PAGE]) for i in range(0, len(wanted), PMID_PAGE))
    return [chroma_where(replace(where, pmids=page)) for page in pages]


def chroma_where_document(variants: list[str]) -> dict:
    contains = [{"$contains": v} for v in variants]
    return contains[0] if len(contains) == 1 else {"$or": contains}
