"""Traces each reference/candidate disagreement to a cause (a DIVERGENCE_KINDS value)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.corpus.ledger import diff_inventory
from candlefire_pipeline.parity.queries import ParityQuery
from candlefire_pipeline.parity.report.model import Divergence
from candlefire_pipeline.retrieval.retriever import Retrieval, Retriever
from candlefire_pipeline.retrieval.variants import term_variants

#: Chroma's $contains is documented to run on a trigram index where shorter strings never match
#: (chromadb 1.5.9 does not show it, see backends/chroma/); a divergence it causes is named.
SHORT_TERM_CHARS = 3
LISTED_INVENTORY_CHUNKS = 50  # inventory divergences listed one by one; the rest are counted
SUBSTRING_EVIDENCE_ROWS = 50  # chunks fetched to explain a grounding disagreement


@dataclass
class TraceContext:
    """What one run needs to trace a divergence to its cause."""

    retrievers: Mapping[str, Retriever]
    reference: str
    candidate: str
    oracle: str | None
    differing_chunks: dict[str, list[str]]  # pmid -> chunk ids that differ between the stores
    inventory_sides: dict[str, str]  # chunk_id -> backend that has it (or "both" when changed)


def _pmid_of(chunk_id: str) -> str:
    """Chunk ids are `{pmid}_s{i}` or the bare pmid, and a pmid never contains "_"."""
    return chunk_id.split("_", 1)[0]


def compare_inventory(
    retrievers: Mapping[str, Retriever], reference: str, candidate: str, oracle: str | None
) -> tuple[dict, list[Divergence], TraceContext]:
    """Compare the two stores' chunk_hashes: chunks only one side has, or with other content."""
    diff = diff_inventory(
        retrievers[reference].backend.chunk_hashes(), retrievers[candidate].backend.chunk_hashes()
    )
    only_ref, only_cand, changed = diff.missing, diff.orphaned, diff.stale
    sides = {c: reference for c in only_ref} | {c: candidate for c in only_cand}
    sides |= {c: "both" for c in changed}
    differing: dict[str, list[str]] = {}
    for chunk_id in sorted(sides):
        differing.setdefault(_pmid_of(chunk_id), []).append(chunk_id)
    divergences = [
        Divergence(
            kind="missing_chunk", field="inventory", pmid=_pmid_of(c), chunk_id=c,
            present_in=side,
            detail="content differs between the stores" if side == "both"
            else f"chunk only in {side}",
        )
        for c, side in sorted(sides.items())[:LISTED_INVENTORY_CHUNKS]
    ]  # fmt: skip
    inventory = {
        "differing": len(sides),
        "only_in_reference": only_ref[:LISTED_INVENTORY_CHUNKS],
        "only_in_candidate": only_cand[:LISTED_INVENTORY_CHUNKS],
        "content_differs": changed[:LISTED_INVENTORY_CHUNKS],
    }
    ctx = TraceContext(retrievers, reference, candidate, oracle, differing, sides)
    return inventory, divergences, ctx


def _documents(ctx: TraceContext, backend: str, pmid: str) -> list[str]:
    return [row["document"] for row in ctx.retrievers[backend].backend.fetch(Filter(pmids=(pmid,)))]


def _term_kind(term: str, documents: Sequence[str]) -> str | None:
    """ "short_term" / "case" when that explains why `term` matches these documents on one side.

    "case" needs only one chunk that matches case-insensitively alone: it changes the paper's
    best-matching chunk, and with it the paper's place in the keyword list, on one side only.
    """
    variants = term_variants(term)
    short = [v.casefold() for v in variants if len(v) < SHORT_TERM_CHARS]
    if any(v in d.casefold() for v in short for d in documents):
        return "short_term"
    for document in documents:
        folded = document.casefold()
        if not any(v in document for v in variants) and any(
            v.casefold() in folded for v in variants
        ):
            return "case"
    return None


def _missing_chunk(ctx: TraceContext, pmid: str, **fields) -> Divergence | None:
    chunks = ctx.differing_chunks.get(pmid)
    if not chunks:
        return None
    side = ctx.inventory_sides[chunks[0]]
    return Divergence(
        kind="missing_chunk", pmid=pmid, chunk_id=chunks[0], present_in=side,
        detail=f"chunks differing between the stores: {', '.join(chunks)}", **fields,
    )  # fmt: skip


def _oracle_side(
    ctx: TraceContext, has_it: str, other: str, pmid: str, oracle_list: list[str]
) -> tuple[str, str]:
    """ann_miss when the exact oracle sides with one backend (it always does for one PMID once
    term and chunk causes are ruled out): the other side's approximate search lost or gained it."""
    if ctx.oracle is None:
        return "other", "no oracle to arbitrate"
    if ctx.oracle in (has_it, other):  # a store traced against the oracle itself
        store = other if has_it == ctx.oracle else has_it
        verb = "lost" if has_it == ctx.oracle else "added"
        return "ann_miss", f"{store}'s search {verb} it; the exact oracle is the reference"
    agrees, differs = (has_it, other) if pmid in oracle_list else (other, has_it)
    return "ann_miss", f"the exact oracle agrees with {agrees}, not {differs}"


def keyword_divergences(
    ctx: TraceContext, query: ParityQuery, runs: dict[str, Retrieval]
) -> list[Divergence]:
    ref, cand = set(runs[ctx.reference].keyword_pmids), set(runs[ctx.candidate].keyword_pmids)
    found = []
    for pmid in sorted(ref ^ cand):
        has_it = ctx.reference if pmid in ref else ctx.candidate
        other = ctx.candidate if has_it == ctx.reference else ctx.reference
        base = {"field": "keyword", "query_id": query.id}
        missing = _missing_chunk(ctx, pmid, **base)
        if missing:
            found.append(missing)
            continue
        docs = _documents(ctx, has_it, pmid)
        term, kind = next(
            ((t, k) for t in query.keyword_terms if (k := _term_kind(t, docs))), (None, None)
        )
        if kind:
            detail = f"only {has_it} matches {term!r} in this paper"
        else:
            oracle_list = runs[ctx.oracle].keyword_pmids if ctx.oracle else []
            kind, detail = _oracle_side(ctx, has_it, other, pmid, oracle_list)
        found.append(
            Divergence(kind=kind, pmid=pmid, term=term, present_in=has_it, detail=detail, **base)
        )
    return _attribute_displaced(found)


def _attribute_displaced(found: list[Divergence]) -> list[Divergence]:
    """Extra matches on one side push other papers out of its top-n keyword list: those
    papers diverge because of the term, not because of approximate search."""
    cause = next((d for d in found if d.kind in ("case", "short_term")), None)
    if cause is None:
        return found
    for d in found:
        if d.kind in ("ann_miss", "other") and d.present_in != cause.present_in:
            d.kind, d.term = cause.kind, cause.term
            d.detail = f"displaced from the keyword top-n by matches of {cause.term!r}"
    return found


def grounding_divergences(
    ctx: TraceContext, query: ParityQuery, runs: dict[str, Retrieval]
) -> list[Divergence]:
    ref, cand = runs[ctx.reference].grounding, runs[ctx.candidate].grounding
    found = []
    for term in dict.fromkeys(query.keyword_terms):
        for scope in ("corpus", "abstract"):
            ref_value = ref.get(term, {}).get(scope)
            cand_value = cand.get(term, {}).get(scope)
            if ref_value == cand_value:
                continue
            says_yes = ctx.reference if ref_value else ctx.candidate
            found.append(_grounding_divergence(ctx, query, term, scope, says_yes))
    return found


def _grounding_divergence(
    ctx: TraceContext, query: ParityQuery, term: str, scope: str, says_yes: str
) -> Divergence:
    """Trace a grounding disagreement through the chunks the 'yes' side matched."""
    retriever = ctx.retrievers[says_yes]
    variants = term_variants(term)
    where = Filter(abstract_only=True) if scope == "abstract" else None
    vectors = np.asarray(retriever.embedder.embed(variants), dtype=np.float32)
    rows = [
        row
        for hits in retriever.backend.substring_candidates(
            variants, vectors, SUBSTRING_EVIDENCE_ROWS, where
        )
        for row in hits
    ]
    base = {"field": "grounding", "query_id": query.id, "term": term, "present_in": says_yes}
    kind = _term_kind(term, [r["document"] for r in rows])
    if kind:
        return Divergence(kind=kind, detail=f"{scope}: only {says_yes} matches", **base)
    for row in rows:
        if row["chunk_id"] in ctx.inventory_sides:
            return Divergence(
                kind="missing_chunk", chunk_id=row["chunk_id"], pmid=row["pmid"],
                detail=f"{scope}: the matching chunk differs between the stores", **base,
            )  # fmt: skip
    return Divergence(kind="other", detail=f"{scope}: only {says_yes} says grounded", **base)


def top_divergences(
    ctx: TraceContext,
    query: ParityQuery,
    runs: dict[str, Retrieval],
    ref_top: list[str],
    cand_top: list[str],
    keyword: list[Divergence],
) -> list[Divergence]:
    """Per PMID in only one top-k: a differing chunk, a keyword-list term divergence, or ANN."""
    base = {"field": "top15", "query_id": query.id}
    only = [(p, ctx.reference) for p in ref_top if p not in cand_top]
    only += [(p, ctx.candidate) for p in cand_top if p not in ref_top]
    if not only:
        if ref_top == cand_top:
            return []
        return [Divergence(kind="order", detail="same PMIDs, different order", **base)]
    candidates = {p for run in runs.values() for p in _all_pmids(run)}
    displaced_by = sorted(p for p in candidates if p in ctx.differing_chunks)
    term_cause = next((d for d in keyword if d.kind in ("case", "short_term")), None)
    found = []
    for pmid, has_it in only:
        other = ctx.candidate if has_it == ctx.reference else ctx.reference
        missing = _missing_chunk(ctx, pmid, **base)
        if missing:
            found.append(missing)
        elif displaced_by:
            chunk = ctx.differing_chunks[displaced_by[0]][0]
            found.append(Divergence(
                kind="missing_chunk", pmid=pmid, chunk_id=chunk, present_in=has_it,
                detail=f"displaced: candidate {displaced_by[0]} has chunks differing", **base,
            ))  # fmt: skip
        elif term_cause:
            found.append(Divergence(
                kind=term_cause.kind, pmid=pmid, term=term_cause.term, present_in=has_it,
                detail=f"follows the {term_cause.field} divergence on {term_cause.term!r}",
                **base,
            ))  # fmt: skip
        else:
            oracle_top = runs[ctx.oracle].pmids if ctx.oracle else []
            kind, detail = _oracle_side(ctx, has_it, other, pmid, oracle_top)
            found.append(Divergence(kind=kind, pmid=pmid, present_in=has_it, detail=detail, **base))
    return found


def _all_pmids(run: Retrieval) -> list[str]:
    return run.pmids + run.semantic_pmids + run.entity_pmids + run.keyword_pmids
