"""Whether two arms of the app benchmark answered a request alike, and if not, why.

A request's answer (search_path.Answer) holds three ranked stages, their fusion and what is read
after it. Two answers agree when every list holds the same rows in the same order, scores
within TIE (rows whose scores are within TIE may swap, and a list cut inside such a tie may
hold another member of it: Chroma computes distances in float32, pgvector in double). A stage
whose members differ is put down to an approximate HNSW walk, attributed to whichever arm's
list is not the exact search's (pgvector ranking every row); a difference that neither ties nor
a stage's members explain is unexplained: a bug to look at.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.app.search_path import Answer

#: Scores closer than this may come in either order.
TIE = 1e-5
STAGES = ("search", "entities", "keyword")
#: Row fields that are scores, not content (compared within TIE, not for equality).
SCORES = ("similarity", "rrf_score")

IDENTICAL, TIES, DIFFER = "identical", "tied rows swapped", "members differ"
#: Request verdicts, in the order a summary lists them.
WALK, UNEXPLAINED = "an HNSW walk", "unexplained"
KINDS = (IDENTICAL, TIES, WALK, UNEXPLAINED)


def _content(row: dict) -> dict:
    return {k: v for k, v in row.items() if k not in SCORES}


def ranked_alike(expected: Sequence[dict], got: Sequence[dict], key: str, score: str) -> str:
    """IDENTICAL, TIES (only tied rows swapped, or another member of a tie at the cut) or
    DIFFER (other rows, other scores, or a row's content differing)."""
    if len(expected) != len(got):
        return DIFFER
    by_key = {row[key]: row for row in expected}
    if any(row[key] in by_key and _content(row) != _content(by_key[row[key]]) for row in got):
        return DIFFER
    last = expected[-1][score] if expected else 0.0
    verdict = IDENTICAL
    for e, g in zip(expected, got, strict=True):
        if abs(e[score] - g[score]) > TIE:
            return DIFFER
        if e[key] == g[key]:
            continue
        tied = any(r[key] == g[key] and abs(r[score] - g[score]) <= TIE for r in expected)
        if not (tied or abs(g[score] - last) <= TIE):
            return DIFFER
        verdict = TIES
    return verdict


def compare(expected: Answer, got: Answer) -> dict[str, str]:
    """Per part of the answer: IDENTICAL, TIES or DIFFER."""
    parts = {s: ranked_alike(getattr(expected, s), getattr(got, s), "chunk_id", "similarity")
             for s in STAGES}  # fmt: skip
    parts["fused"] = ranked_alike(expected.fused, got.fused, "pmid", "rrf_score")
    for name in ("grounding", "texts", "paper"):
        parts[name] = IDENTICAL if getattr(expected, name) == getattr(got, name) else DIFFER
    return parts


@dataclass(frozen=True)
class Verdict:
    """How two arms' answers to one request compare."""

    kind: str  # one of KINDS
    #: stages whose members differ between the arms
    stages: tuple[str, ...] = ()
    #: arms whose list of such a stage is not the exact search's
    off_exact: tuple[str, ...] = ()


def verdict(answers: dict[str, Answer], exact: Answer | None = None) -> Verdict:
    """Two arms' answers ({arm name: answer}) compared, with the exact one to attribute a stage
    whose members differ."""
    (first, a), (second, b) = answers.items()
    parts = compare(a, b)
    if all(v == IDENTICAL for v in parts.values()):
        return Verdict(IDENTICAL)
    if parts["grounding"] == DIFFER:  # no ranking involved: any row or none
        return Verdict(UNEXPLAINED)
    stages = tuple(s for s in STAGES if parts[s] == DIFFER)
    off = () if exact is None else tuple(
        arm for arm, answer in answers.items()
        if any(ranked_alike(getattr(exact, s), getattr(answer, s), "chunk_id", "similarity")
               == DIFFER for s in stages)
    )  # fmt: skip
    if stages and (off or exact is None):
        return Verdict(WALK, stages, off)
    if parts["fused"] == IDENTICAL and (parts["texts"], parts["paper"]) != (IDENTICAL,) * 2:
        return Verdict(UNEXPLAINED, stages)  # the same papers, read otherwise
    if all(parts[s] == IDENTICAL for s in STAGES):
        return Verdict(UNEXPLAINED)  # identical stages, fused otherwise
    # tied rows swapped in a stage move ranks, hence the fusion and what is read after it;
    # stages whose members differ while both are the exact search's differ inside ties too
    return Verdict(TIES, stages)


def summary(verdicts: Sequence[Verdict], arms: tuple[str, str]) -> str:
    """One sentence: how many requests were answered alike, and why the others were not."""
    kinds = Counter(v.kind for v in verdicts)
    n = len(verdicts)
    text = (f"{kinds[IDENTICAL]} of {n} requests answered identically by {arms[0]} and"
            f" {arms[1]}, {kinds[TIES]} alike but for tied rows (scores within {TIE:g})"
            f" swapped or cut")  # fmt: skip
    walks = [v for v in verdicts if v.kind == WALK]
    if walks:
        stages = Counter(s for v in walks for s in v.stages)
        blamed = Counter("both" if len(v.off_exact) == 2 else (v.off_exact or ("?",))[0]
                         for v in walks)  # fmt: skip
        text += (f"; {len(walks)} differ where an HNSW walk found other neighbours (stage:"
                 f" {_counts(stages)}; the list that is not the exact search's: "
                 f"{_counts(blamed)})")  # fmt: skip
    text += f"; {kinds[UNEXPLAINED]} unexplained."
    return text


def _counts(counter: Counter) -> str:
    return ", ".join(f"{name} {count}" for name, count in counter.most_common())
