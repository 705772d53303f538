"""A random ALS-like corpus and random drops for the term cache's tests."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import numpy as np

from candlefire_pipeline.embedding import HashingEmbedder
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows

EMBEDDER = HashingEmbedder(dim=32)
#: Terms written into documents in their spelling variants; some frequent, some rare.
CODES = ("SPG302", "SOD1", "TDP-43", "C9orf72", "G93A", "FUS", "ATXN2", "ALS2", "NEFL", "OPTN")
WORDS = ("motor", "neuron", "axon", "synapse", "mouse", "patient", "trial", "protein", "rna",
         "stress", "granule", "muscle", "spinal", "cortex", "marker", "survival")  # fmt: skip
#: Texts the tests keep: variants (frequent, rare, absent, case-only) and entity names.
VARIANTS = ("SPG302", "SPG 302", "SPG-302", "SOD1", "TDP-43", "TDP43", "C9orf72", "G93A",
            "motor", "Motor", "granule", "ZZ999", "FUS", "NEFL")  # fmt: skip
NAMES = ("SOD1 mutation", "motor neuron", "stress granule", "TDP-43 aggregates", "FUS",
         "spinal cord", "muscle weakness")  # fmt: skip


def _spelled(rng: random.Random, code: str) -> str:
    cut = next((i for i, ch in enumerate(code) if ch.isdigit()), None)
    if cut in (None, 0) or rng.random() < 0.5:
        return code
    return code[:cut] + rng.choice((" ", "-")) + code[cut:]


def document(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(4, 9))
    for _ in range(rng.choice((0, 0, 1, 1, 2))):
        words.insert(rng.randrange(len(words) + 1), _spelled(rng, rng.choice(CODES)))
    if rng.random() < 0.1:
        words.insert(0, "Motor")
    return " ".join(words)


@dataclass
class Corpus:
    """Papers by pmid: each a list of chunk dicts (abstract first)."""

    rng: random.Random
    papers: dict[str, list[dict]] = field(default_factory=dict)
    next_pmid: int = 1000
    version: int = 0

    def paper(self, pmid: str) -> list[dict]:
        self.version += 1
        n = self.rng.choice((1, 1, 2, 3))
        full = n > 1
        tag = f"{pmid}-{self.version}"
        return [
            chunk(pmid, i, document=document(self.rng), has_full_text=full,
                  content_hash=f"c-{tag}-{i}", paper_hash=f"p-{tag}")
            for i in range(n)
        ]  # fmt: skip

    def add(self, count: int) -> list[str]:
        pmids = []
        for _ in range(count):
            self.next_pmid += 1
            pmid = str(self.next_pmid)
            self.papers[pmid] = self.paper(pmid)
            pmids.append(pmid)
        return pmids

    def replace(self, pmids: list[str]) -> None:
        for pmid in pmids:
            self.papers[pmid] = self.paper(pmid)

    def delete(self, pmids: list[str]) -> None:
        for pmid in pmids:
            del self.papers[pmid]

    def rows(self, pmids: list[str]):
        chunks = [c for pmid in pmids for c in self.papers[pmid]]
        vectors = EMBEDDER.embed([c["document"] for c in chunks])
        return make_rows(chunks, vectors, model_id=EMBEDDER.model_id)

    def pick(self, share: float) -> list[str]:
        pmids = sorted(self.papers)
        return self.rng.sample(pmids, max(1, int(len(pmids) * share)))


def vectors(texts) -> np.ndarray:
    return EMBEDDER.embed(list(texts))
