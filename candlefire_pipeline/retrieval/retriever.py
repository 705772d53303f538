"""candle-fire's retriever over any VectorBackend: candidate fetch, then shared ranking."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from candlefire_pipeline.backends.base import DimensionMismatchError, Filter, VectorBackend
from candlefire_pipeline.retrieval.ranking import apply_citation_boost, rrf_merge
from candlefire_pipeline.retrieval.rerank import Reranker, load_reranker, rerank
from candlefire_pipeline.retrieval.ties import TIE_MARGIN, best_per_pmid, canonical_top
from candlefire_pipeline.retrieval.variants import term_variants
from candlefire_pipeline.settings import RetrievalSettings

logger = logging.getLogger(__name__)

TIMING_STAGES = (
    "embed", "semantic", "entities", "keyword", "grounding", "rrf", "rerank", "boost", "total",
)  # fmt: skip


class QueryEmbedder(Protocol):
    """The part of embedding.Embedder the retriever uses."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass
class Retrieval:
    """One retrieve() answer: final top results, grounding, per-list PMIDs and stage timings."""

    results: list[dict]
    grounding: dict[str, dict[str, bool]]
    keyword_pmids: list[str]
    semantic_pmids: list[str]
    entity_pmids: list[str]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def pmids(self) -> list[str]:
        return [row["pmid"] for row in self.results]


def _pmids(rows: Iterable[dict]) -> list[str]:
    return [row["pmid"] for row in rows]


class _Stopwatch:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - start


class Retriever:
    """Hybrid retrieval (semantic + entity + keyword, RRF, rerank, citation boost)."""

    def __init__(
        self,
        backend: VectorBackend,
        embedder: QueryEmbedder,
        settings: RetrievalSettings = RetrievalSettings(),  # noqa: B008 - frozen dataclass
        reranker: Reranker | None = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.settings = settings
        if reranker is None and settings.reranker_model:
            reranker = load_reranker(settings.reranker_model)
        self.reranker = reranker
        self._model_checked = False
        self._check_model()

    # guards -----------------------------------------------------------------------
    def _check_model(self) -> None:
        """Refuse to query a store built with another model or dimension."""
        if self._model_checked:
            return
        stored = self.backend.stored_model()
        if stored is None:  # empty store: check again once something is written
            return
        expected = (self.embedder.model_id, int(self.embedder.dim))
        if (stored[0], int(stored[1])) != expected:
            raise DimensionMismatchError(
                f"{self.backend.name} store holds vectors of model {stored[0]!r} (dim {stored[1]})"
                f" but the query embedder is {expected[0]!r} (dim {expected[1]}); re-embed the"
                " corpus or configure the store's model"
            )
        self._model_checked = True

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.shape != (len(texts), self.embedder.dim):
            raise DimensionMismatchError(
                f"embedder returned shape {vectors.shape}, expected ({len(texts)}, "
                f"{self.embedder.dim})"
            )
        return vectors

    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, str):
            return self._embed([query])[0]
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if vector.shape != (self.embedder.dim,):
            raise DimensionMismatchError(
                f"query vector has {vector.shape[0]} dims, the store expects {self.embedder.dim}"
            )
        return vector

    # candidate fetch --------------------------------------------------------------
    def search(
        self, query: str | np.ndarray, n: int | None = None, where: Filter | None = None
    ) -> list[dict]:
        """Top-n papers by their best chunk (over-fetching 2n chunks), most similar first."""
        self._check_model()
        n = self.settings.semantic_n if n is None else n
        vector = self._query_vector(query)
        asked = 2 * n + TIE_MARGIN
        rows = self.backend.semantic_candidates(vector[None, :], asked, where, stage="semantic")[0]
        return best_per_pmid(canonical_top(rows, 2 * n, asked))[:n]

    def entity_names_used(self, names: Iterable[str]) -> list[str]:
        """The distinct non-blank names searched, at most entity_cap, in given order."""
        cleaned = list(dict.fromkeys(name.strip() for name in names if name and name.strip()))
        cap = self.settings.entity_cap
        if len(cleaned) > cap:
            logger.info("entity search capped at %d of %d names", cap, len(cleaned))
        return cleaned[:cap]

    def search_by_entities(
        self, names: Iterable[str], vectors: np.ndarray | None = None
    ) -> list[dict]:
        """entity_hits chunks per name in one round trip, merged by best similarity per PMID.

        `vectors` (rows aligned with entity_names_used(names)) skips embedding the names.
        """
        self._check_model()
        used = self.entity_names_used(names)
        if not used:
            return []
        if vectors is None:
            vectors = self._embed(used)
        if len(vectors) != len(used):
            raise ValueError(f"{len(vectors)} entity vectors for {len(used)} entity names")
        keep = self.settings.entity_hits
        hit_lists = self.backend.semantic_candidates(vectors, keep + TIE_MARGIN, stage="entities")
        return best_per_pmid(
            row for hits in hit_lists for row in canonical_top(hits, keep, keep + TIE_MARGIN)
        )

    def search_by_keyword(
        self, terms: Iterable[str], query_vector: np.ndarray, n: int | None = None
    ) -> list[dict]:
        """Papers whose chunks contain any variant of any term, in semantic order, best per PMID."""
        self._check_model()
        n = self.settings.keyword_n if n is None else n
        variants = list(dict.fromkeys(v for term in terms for v in term_variants(term)))
        if not variants:
            return []
        vector = self._query_vector(query_vector)
        asked = 2 * n + TIE_MARGIN
        rows = self.backend.substring_candidates(variants, vector, asked)
        return best_per_pmid(canonical_top(rows, 2 * n, asked))[:n]

    def is_grounded_in_corpus(self, term: str) -> bool:
        """Whether any variant of term is a substring of any chunk."""
        return self.backend.contains(term_variants(term))

    def is_grounded_in_abstract(self, term: str) -> bool:
        """Whether any variant of term is a substring of an abstract chunk (chunk_index 0)."""
        return self.backend.contains(term_variants(term), Filter(abstract_only=True))

    def grounding(self, terms: Iterable[str]) -> dict[str, dict[str, bool]]:
        """term -> {corpus, abstract}; asks the abstract first since it implies the corpus."""
        found: dict[str, dict[str, bool]] = {}
        for term in terms:
            if term in found:
                continue
            abstract = self.is_grounded_in_abstract(term)
            corpus = abstract or self.is_grounded_in_corpus(term)
            found[term] = {"corpus": corpus, "abstract": abstract}
        return found

    # paper fetch ------------------------------------------------------------------
    def get_paper(self, pmid: str) -> dict | None:
        """The abstract chunk (chunk_index 0) of a paper, or None when it is not stored."""
        rows = self.backend.fetch(Filter(pmids=(pmid,), abstract_only=True))
        return rows[0] if rows else None

    def paper_texts_for_pmids(self, pmids: Iterable[str]) -> dict[str, str]:
        """pmid -> every stored chunk of the paper, abstract chunk first, joined by blank lines."""
        wanted = tuple(dict.fromkeys(pmids))
        if not wanted:
            return {}
        chunks: dict[str, list[dict]] = {}
        for row in self.backend.fetch(Filter(pmids=wanted)):
            chunks.setdefault(row["pmid"], []).append(row)
        return {
            pmid: "\n\n".join(
                row["document"] for row in sorted(rows, key=lambda row: row["chunk_index"])
            )
            for pmid, rows in chunks.items()
        }

    # full pipeline ----------------------------------------------------------------
    def retrieve(
        self, query: str, entity_names: Sequence[str] = (), terms: Sequence[str] = ()
    ) -> Retrieval:
        """Semantic + entity + keyword candidates -> RRF -> rerank -> citation/recency boost."""
        self._check_model()
        settings = self.settings
        clock = _Stopwatch()
        with clock.stage("total"):
            names = self.entity_names_used(entity_names)
            terms = list(dict.fromkeys(terms))
            with clock.stage("embed"):
                vectors = self._embed([query, *names])
            with clock.stage("semantic"):
                semantic = self.search(vectors[0], settings.semantic_n)
            with clock.stage("entities"):
                entities = self.search_by_entities(names, vectors[1:]) if names else []
            with clock.stage("keyword"):
                keyword = self.search_by_keyword(terms, vectors[0]) if terms else []
            with clock.stage("grounding"):
                grounding = self.grounding(terms)
            with clock.stage("rrf"):
                fused = rrf_merge(
                    [semantic, entities, keyword], k=settings.rrf_k, top=settings.rrf_top
                )
            with clock.stage("rerank"):
                reranked = rerank(
                    query, fused, self.reranker, settings.rerank_top, settings.rerank_doc_chars
                )
            with clock.stage("boost"):
                results = apply_citation_boost(
                    reranked,
                    settings.recency_start_year,
                    settings.recency_end_year,
                    settings.recency_end_factor,
                )
        return Retrieval(
            results=results,
            grounding=grounding,
            keyword_pmids=_pmids(keyword),
            semantic_pmids=_pmids(semantic),
            entity_pmids=_pmids(entities),
            timings={stage: clock.timings.get(stage, 0.0) for stage in TIMING_STAGES},
        )
