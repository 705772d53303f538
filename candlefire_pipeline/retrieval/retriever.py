"""candle-fire's retriever over any VectorBackend: candidate fetch, then shared ranking."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from candlefire_pipeline.backends.base import DimensionMismatchError, Filter, VectorBackend
from candlefire_pipeline.retrieval.citations import Citations, cite
from candlefire_pipeline.retrieval.query_plan import QueryPlan, distinct_variants, searched_names
from candlefire_pipeline.retrieval.ranking import apply_citation_boost, rrf_merge
from candlefire_pipeline.retrieval.rerank import Reranker, load_reranker, rerank
from candlefire_pipeline.retrieval.stages import (
    entity_stage,
    keyword_stage,
    semantic_stage,
    variant_hits,
)
from candlefire_pipeline.retrieval.variants import term_variants
from candlefire_pipeline.retrieval.vector_cache import QueryVectorCache
from candlefire_pipeline.settings import RetrievalSettings

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
    """One retrieve() answer: the cited papers, every stage's rows, grounding and timings."""

    #: the papers the app cites: the boosted top `rerank_top`, then landscape-only keyword hits;
    #: empty when the grounding gate withheld every paper
    results: list[dict]
    grounding: dict[str, dict[str, bool]]
    semantic: list[dict]
    entities: list[dict]
    keyword: list[dict]
    #: the RRF top `rrf_top` (rrf_score on each row), before rerank
    fused: list[dict]
    plan: QueryPlan
    citations: Citations
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def pmids(self) -> list[str]:
        return _pmids(self.results)

    @property
    def semantic_pmids(self) -> list[str]:
        return _pmids(self.semantic)

    @property
    def entity_pmids(self) -> list[str]:
        return _pmids(self.entities)

    @property
    def keyword_pmids(self) -> list[str]:
        return _pmids(self.keyword)


def _pmids(rows: Iterable[dict]) -> list[str]:
    return [row["pmid"] for row in rows]


def _chunk_order(row: dict) -> tuple[str, int]:
    return row["pmid"], row["chunk_index"]


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
    """candle-fire's hybrid retrieval over any store: the semantic, entity and keyword stages,
    RRF, rerank, citation/recency boost, then the app's grounding gate and landscape papers."""

    def __init__(
        self,
        backend: VectorBackend,
        embedder: QueryEmbedder,
        settings: RetrievalSettings = RetrievalSettings(),  # noqa: B008 - frozen dataclass
        reranker: Reranker | None = None,
        vector_cache: QueryVectorCache | None = None,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.settings = settings
        #: entity names' and keyword variants' vectors across requests (the query is never kept)
        if vector_cache is None:
            vector_cache = QueryVectorCache(settings.query_vector_cache)
        self.vector_cache = vector_cache
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

    def embed_texts(
        self, texts: Sequence[str], cacheable: Iterable[str] = ()
    ) -> dict[str, np.ndarray]:
        """text -> vector for distinct texts: the `cacheable` ones from the vector cache when
        there, every other one in one embedder call (the cacheable ones then kept)."""
        texts = list(dict.fromkeys(texts))
        keep = set(cacheable).intersection(texts)
        identity = (self.embedder.model_id, int(self.embedder.dim))
        found = self.vector_cache.get_many(identity, [t for t in texts if t in keep])
        missing = [t for t in texts if t not in found]
        if missing:
            vectors = np.asarray(self.embedder.embed(missing), dtype=np.float32)
            if vectors.shape != (len(missing), self.embedder.dim):
                raise DimensionMismatchError(
                    f"embedder returned shape {vectors.shape}, expected ({len(missing)}, "
                    f"{self.embedder.dim})"
                )
            made = dict(zip(missing, vectors, strict=True))
            self.vector_cache.put_many(identity, {t: v for t, v in made.items() if t in keep})
            found.update(made)
        return {text: found[text] for text in texts}

    def _matrix(self, vectors: dict[str, np.ndarray], texts: Sequence[str]) -> np.ndarray:
        return np.stack([vectors[t] for t in texts]) if texts else np.empty((0, self.embedder.dim))

    def _query_vector(self, query: str | np.ndarray) -> np.ndarray:
        if isinstance(query, str):
            return self.embed_texts([query])[query]
        vector = np.asarray(query, dtype=np.float32).reshape(-1)
        if vector.shape != (self.embedder.dim,):
            raise DimensionMismatchError(
                f"query vector has {vector.shape[0]} dims, the store expects {self.embedder.dim}"
            )
        return vector

    # candle-fire's retriever functions ----------------------------------------------
    def search(
        self, query: str | np.ndarray, n: int | None = None, where: Filter | None = None
    ) -> list[dict]:
        """candle-fire's search(text, n): papers by their best of the 2n most similar chunks."""
        self._check_model()
        n = self.settings.semantic_n if n is None else n
        return semantic_stage(self.backend, self._query_vector(query), n, where)

    def search_by_entities(self, names: Sequence[str], n: int | None = None) -> list[dict]:
        """candle-fire's search_by_entities: the first entity_cap names, each embedded and
        searched for entity_hits chunks in one round trip, best row per paper, first n."""
        self._check_model()
        names = searched_names(names, self.settings.entity_cap)
        n = self.settings.entity_n if n is None else n
        return self._entities(names, self.embed_texts(names, cacheable=names), n)

    def _entities(self, names: Sequence[str], vectors: dict[str, np.ndarray], n: int) -> list[dict]:
        matrix = self._matrix(vectors, names)
        return entity_stage(self.backend, names, matrix, self.settings.entity_hits, n)

    def search_by_keyword(self, terms: Sequence[str], n: int | None = None) -> list[dict]:
        """candle-fire's search_by_keyword: per variant of each non-blank term, the n chunks
        containing it most similar to the variant itself, best row per paper, no overall cap."""
        self._check_model()
        variants = distinct_variants(terms)
        hits = self._variant_hits(variants, self.embed_texts(variants, cacheable=variants), n)
        return keyword_stage(hits, variants)

    def _variant_hits(
        self, variants: list[str], vectors: dict[str, np.ndarray], n: int | None = None
    ) -> dict[str, list[dict]]:
        n = self.settings.keyword_hits if n is None else n
        return variant_hits(self.backend, variants, self._matrix(vectors, variants), n)

    def is_grounded_in_corpus(self, term: str) -> bool:
        """Whether any variant of term is a substring of any chunk."""
        return self.grounding([term])[term]["corpus"]

    def is_grounded_in_abstract(self, term: str) -> bool:
        """Whether any variant of term is a substring of an abstract chunk (chunk_index 0)."""
        return self.grounding([term])[term]["abstract"]

    def grounding(self, terms: Iterable[str]) -> dict[str, dict[str, bool]]:
        """term -> {corpus, abstract} for each non-blank term (every term in one store call);
        the abstract implies the corpus."""
        wanted = list(dict.fromkeys(t for t in terms if t.strip()))
        if not wanted:
            return {}
        facts = self.backend.ground_terms([term_variants(t) for t in wanted])
        return {
            term: {"corpus": fact.corpus or fact.abstract, "abstract": fact.abstract}
            for term, fact in zip(wanted, facts, strict=True)
        }

    # paper fetch ------------------------------------------------------------------
    def get_paper(self, pmid: str) -> dict | None:
        """The abstract chunk (chunk_index 0) of a paper, or None when it is not stored."""
        rows = self.backend.fetch(Filter(pmids=(pmid,), abstract_only=True))
        return rows[0] if rows else None

    def paper_texts_for_pmids(self, pmids: Iterable[str]) -> dict[str, dict[str, str]]:
        """candle-fire's shape: pmid -> {"abstract": the chunk_index 0 document, "full": every
        stored chunk in chunk order joined by newlines}, "" for a paper not stored."""
        wanted = tuple(p for p in dict.fromkeys(pmids) if p)
        if not wanted:
            return {}
        out = {pmid: {"abstract": "", "full": ""} for pmid in wanted}
        parts: dict[str, list[str]] = {pmid: [] for pmid in wanted}
        for row in sorted(self.backend.fetch(Filter(pmids=wanted)), key=_chunk_order):
            parts[row["pmid"]].append(row["document"])
            if row["chunk_index"] == 0:
                out[row["pmid"]]["abstract"] = row["document"]
        for pmid, docs in parts.items():
            out[pmid]["full"] = "\n".join(docs)
        return out

    # the app's search path --------------------------------------------------------
    def retrieve(
        self, query: str, entity_names: Sequence[str] = (), terms: Sequence[str] | None = None
    ) -> Retrieval:
        """The papers candle-fire's app would cite for a query: every text embedded in one call,
        the three stages, RRF, rerank, boost, then the grounding gate and landscape papers.

        Keyword terms are the entity names followed by the query text's identifier tokens, or,
        when `terms` is given, by those terms instead of the tokens.
        """
        self._check_model()
        settings, clock = self.settings, _Stopwatch()
        with clock.stage("total"):
            plan = QueryPlan.build(query, entity_names, terms, settings.entity_cap)
            with clock.stage("embed"):
                vectors = self.embed_texts(plan.texts(), cacheable=plan.short_texts())
            with clock.stage("semantic"):
                semantic = semantic_stage(self.backend, vectors[query], settings.semantic_n)
            with clock.stage("entities"):
                entities = self._entities(plan.entity_names, vectors, settings.entity_n)
            with clock.stage("keyword"):
                variants = plan.distinct_variants
                hits = self._variant_hits(variants, vectors)
                keyword = keyword_stage(hits, variants)
            with clock.stage("grounding"):
                grounding = self.grounding(plan.keyword_terms)
            with clock.stage("rrf"):
                fused = rrf_merge([semantic, entities, keyword], settings.rrf_k, settings.rrf_top)
            with clock.stage("rerank"):
                reranked = rerank(
                    query, fused, self.reranker, settings.rerank_top, settings.rerank_doc_chars
                )
            with clock.stage("boost"):
                ranked = apply_citation_boost(
                    reranked,
                    settings.recency_start_year,
                    settings.recency_end_year,
                    settings.recency_end_factor,
                )
                citations = cite(plan, grounding, ranked, hits)
        return Retrieval(
            results=citations.papers,
            grounding=grounding,
            semantic=semantic,
            entities=entities,
            keyword=keyword,
            fused=fused,
            plan=plan,
            citations=citations,
            timings={stage: clock.timings.get(stage, 0.0) for stage in TIMING_STAGES},
        )
