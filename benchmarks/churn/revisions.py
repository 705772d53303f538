"""Update drops for the churn soak: new versions of a share of the workload's papers.

A revised paper keeps its pmid, chunk ids and shape (the corpus stays the same size and
distribution, so recall and latency stay comparable with the fresh build); its chunks get new
vectors (the same recipe as common/corpus.synthetic_corpus: the paper's own SciFact title
embedding, a new second one, new noise) and new text, hence new content and paper hashes.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict

import numpy as np
import pyarrow as pa

from benchmarks.common.corpus import SyntheticCorpus
from benchmarks.common.data import DOC_CHARS, text_hash
from candlefire_pipeline.corpus.schema import store_rows


class Reviser:
    """The corpus as it stands after each drop, and the rows of the next drop."""

    def __init__(self, corpus: SyntheticCorpus, papers: list[dict], base: np.ndarray, seed=23):
        self.chunks = [dict(c) for c in corpus.chunks]
        self.vectors = corpus.vectors.copy()
        self.papers, self.base = papers, base
        self._rng, self._noise = random.Random(seed), np.random.default_rng(seed)
        self._title_index = {p["title"]: i for i, p in reversed(list(enumerate(papers)))}
        self.by_pmid: dict[str, list[int]] = defaultdict(list)
        for i, c in enumerate(self.chunks):
            self.by_pmid[c["pmid"]].append(i)
        self.pmids = sorted(self.by_pmid)

    def rows(self, model_id: str, batch_key: str = "fresh", pmids=None) -> pa.Table:
        """The current rows (all, or those of `pmids`) as a store table."""
        index = range(len(self.chunks)) if pmids is None else [
            i for p in pmids for i in self.by_pmid[p]
        ]  # fmt: skip
        index = list(index)
        return store_rows([self.chunks[i] for i in index], self.vectors[index], batch_key, model_id)

    def drop(self, number: int, share: float, model_id: str) -> tuple[pa.Table, list[str]]:
        """Drop `number`: new versions of round(share x papers) papers, as store rows."""
        pmids = sorted(self._rng.sample(self.pmids, round(share * len(self.pmids))))
        for pmid in pmids:
            self._revise(pmid, number)
        return self.rows(model_id, f"drop{number:03d}", pmids), pmids

    def _revise(self, pmid: str, number: int) -> None:
        a = self._title_index[self.chunks[self.by_pmid[pmid][0]]["title"]]
        for i in self.by_pmid[pmid]:
            chunk = self.chunks[i]
            j = chunk["chunk_index"]
            b = a if j == 0 else self._rng.randrange(len(self.papers))
            jitter = self._noise.normal(size=self.base.shape[1]) / math.sqrt(self.base.shape[1])
            vec = self.base[a] + (0.5 * self.base[b] if j else 0.0) + 0.3 * jitter
            self.vectors[i] = vec / np.linalg.norm(vec)
            body = self.papers[b]["abstract"][:DOC_CHARS]
            head = chunk["document"].split("\n", 2)
            chunk["document"] = f"{head[0]}\n{head[1]}\n{body} (revision {number})"
            chunk["content_hash"] = text_hash(chunk["chunk_id"] + chunk["document"])
            chunk["paper_hash"] = text_hash(f"{pmid}/{number}")
