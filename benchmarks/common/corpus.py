"""The synthetic corpus of the retrieval-side benchmarks: real SciFact text and title embeddings
mixed with noise, paper by paper, at any size; 62,196 chunks is candle-fire's corpus at its cap."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.common.data import DOC_CHARS, LATENCY_CHUNKS, text_hash
from candlefire_pipeline.corpus.demo_vocab import GENES, MODELS, OUTCOMES

SECTIONS = ("introduction", "methods", "results", "discussion", "conclusion")


@dataclass(frozen=True)
class SyntheticCorpus:
    chunks: list[dict]
    vectors: np.ndarray
    codes_in_abstracts: list[str]
    codes_in_bodies_only: list[str]
    absent_codes: list[str]


def _code(rng: random.Random) -> str:
    letters = "".join(rng.choice("ABCDEFGHJKLMNPQRSTVWXZ") for _ in range(rng.randint(2, 4)))
    return f"{letters}{rng.randint(10, 9999)}"


def spelling(rng: random.Random, code: str) -> str:
    """A code as it is written: "ABC123", "ABC 123" or "ABC-123"."""
    cut = next(i for i, ch in enumerate(code) if ch.isdigit())
    return code[:cut] + rng.choice(("", " ", "-")) + code[cut:]


def _fit(text: str, filler: str) -> str:
    """About DOC_CHARS characters: text, topped up from filler."""
    while len(text) < DOC_CHARS and filler:
        text = f"{text} {filler}"
    return text[:DOC_CHARS]


@dataclass(frozen=True)
class Codes:
    """Drug-like codes written into chunks: in abstracts, only in body chunks, nowhere."""

    in_abstracts: list[str]
    bodies_only: list[str]
    absent: list[str]


class SyntheticStream:
    """The synthetic corpus paper by paper (deterministic per seed and size), so a corpus of a
    million chunks can be loaded in slices without holding its text; `synthetic_corpus` is its
    whole list. Chunk j of a synthetic paper = normalize(E[a] + 0.5 E[b_j] + 0.3 noise), its text
    the abstract of a (chunk 0) or of b_j (body chunks), cut to ~1,000 characters. Drug-like codes
    are written into some chunks in the three spellings; some live only in body chunks.
    """

    def __init__(self, papers: list[dict], base: np.ndarray, seed: int = 7,
                 size: int = LATENCY_CHUNKS) -> None:  # fmt: skip
        self.papers, self.base, self.size = papers, base, size
        self._rng = random.Random(seed)
        self._noise = np.random.default_rng(seed)
        codes = list(dict.fromkeys(_code(self._rng) for _ in range(700)))[:600]
        self.codes = Codes(codes[:200], codes[200:400], codes[400:])

    def __iter__(self) -> Iterator[tuple[list[dict], list[np.ndarray]]]:
        """(chunks, vectors) of one paper at a time, `size` chunks in all."""
        rng, made, number = self._rng, 0, 0
        while made < self.size:
            number += 1
            a = rng.randrange(len(self.papers))
            n_chunks = min(rng.choice((1, 1, 2, 3, 3, 4, 4, 5, 6)), self.size - made)
            year = rng.randint(1985, 2025) if rng.random() > 0.03 else None
            citations = max(int(rng.paretovariate(1.2)) - 1, 0)
            paper = {"pmid": str(50_000_000 + number), "a": a, "n": n_chunks, "year": year,
                     "citations": citations}  # fmt: skip
            chunks, vectors = zip(*(self._chunk(paper, j) for j in range(n_chunks)), strict=True)
            made += n_chunks
            yield list(chunks), list(vectors)

    def _chunk(self, paper: dict, j: int) -> tuple[dict, np.ndarray]:
        rng, papers, a = self._rng, self.papers, paper["a"]
        b = a if j == 0 else rng.randrange(len(papers))
        # unit-norm Gaussian noise at 0.3 of a real embedding's length
        jitter = self._noise.normal(size=self.base.shape[1]) / math.sqrt(self.base.shape[1])
        vec = self.base[a] + (0.5 * self.base[b] if j else 0.0) + 0.3 * jitter
        text = _fit(papers[b]["abstract"], papers[rng.randrange(len(papers))]["abstract"])
        codes = self.codes
        pool = codes.in_abstracts if j == 0 else codes.in_abstracts + codes.bodies_only
        if rng.random() < 0.05:
            code = spelling(rng, rng.choice(pool))
            cut = rng.randrange(0, len(text) - 20)
            text = f"{text[:cut]} {code} {text[cut:]}"[:DOC_CHARS]
        section = "abstract" if j == 0 else SECTIONS[(j - 1) % len(SECTIONS)]
        title, pmid, n_chunks = papers[a]["title"], paper["pmid"], paper["n"]
        chunk_id = pmid if n_chunks == 1 else f"{pmid}_s{j}"
        document = f"{title}\n" + ("\n" if j == 0 else f"[{section}]\n") + text
        chunk = {
            "chunk_id": chunk_id, "pmid": pmid, "section": section, "chunk_index": j,
            "title": title, "year": paper["year"], "doi": "", "citation_count": paper["citations"],
            "entity_names": "", "mesh_terms": "", "has_full_text": n_chunks > 1,
            "document": document, "content_hash": text_hash(chunk_id + document),
            "paper_hash": text_hash(pmid),
        }  # fmt: skip
        return chunk, vec / np.linalg.norm(vec)


def synthetic_corpus(
    papers: list[dict], base: np.ndarray, seed: int = 7, size: int = LATENCY_CHUNKS
) -> SyntheticCorpus:
    """`size` chunks of SyntheticStream, all in memory."""
    stream = SyntheticStream(papers, base, seed, size)
    chunks: list[dict] = []
    vectors: list[np.ndarray] = []
    for paper_chunks, paper_vectors in stream:
        chunks += paper_chunks
        vectors += paper_vectors
    codes = stream.codes
    return SyntheticCorpus(chunks, np.stack(vectors).astype(np.float32), codes.in_abstracts,
                           codes.bodies_only, codes.absent)  # fmt: skip


def entity_pool(titles: Sequence[str]) -> list[str]:
    """Entity-like names: ALS genes, models and outcomes plus short SciFact title heads."""
    heads = [" ".join(t.split()[:3]).strip(".,:;") for t in titles[:200]]
    return list(dict.fromkeys([*GENES, *MODELS, *OUTCOMES, *heads]))
