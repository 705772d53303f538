"""The retrieval, pgvector-ANN, ingest-limit and parity-gate sections of the settings."""

from __future__ import annotations

from dataclasses import dataclass

from candlefire_pipeline.settings.env import (
    check_between,
    check_choice,
    env_fields,
    env_int,
    env_positive_int,
    env_str,
)


@dataclass(frozen=True)
class RetrievalSettings:
    """candle-fire's retrieval constants (its config.py); ranking is identical on every backend."""

    rrf_k: int = 10
    rrf_top: int = 20
    rerank_top: int = 15
    rerank_doc_chars: int = 1800
    #: papers kept by the semantic search (it reads the 2n most similar chunks)
    semantic_n: int = 30
    #: entity names searched (the first ones as given), chunks per name, papers kept
    entity_cap: int = 12
    entity_hits: int = 10
    entity_n: int = 30
    #: chunks per keyword variant (the keyword list itself has no overall cap)
    keyword_hits: int = 10
    recency_start_year: int = 1990
    recency_end_year: int = 2025
    #: The factor at recency_end_year; later years keep the slope (2026 -> 1.514), not a cap.
    recency_end_factor: float = 1.5
    #: sentence-transformers CrossEncoder id or path; None skips rerank and keeps RRF order.
    reranker_model: str | None = None
    #: entity-name and keyword-variant vectors kept across requests (a bounded LRU keyed by
    #: the model's identity; ~1.5 KB each at 384 dims); 0 embeds every text every time
    query_vector_cache: int = 4096

    def __post_init__(self) -> None:
        if not 0 <= self.query_vector_cache <= 1_000_000:
            raise ValueError(
                "CANDLEFIRE_QUERY_VECTOR_CACHE must be between 0 and 1,000,000 entries, got "
                f"{self.query_vector_cache}"
            )

    @classmethod
    def from_env(cls) -> RetrievalSettings:
        return cls(
            reranker_model=env_str("CANDLEFIRE_RERANKER_MODEL"),
            query_vector_cache=env_int("CANDLEFIRE_QUERY_VECTOR_CACHE", cls.query_vector_cache),
        )


#: Precision of pgvector's HNSW index (halfvec: half the index bytes; the column stays float32).
PG_VECTOR_TYPES = ("vector", "halfvec")


#: ANN index over the stored vectors: "binary" = HNSW over binary_quantize(), then exact re-rank.
PG_QUANTIZATIONS = ("none", "binary")


PG_ITERATIVE_SCANS = ("off", "relaxed_order", "strict_order")


@dataclass(frozen=True)
class PgAnnSettings:
    """pgvector's ANN index layout and filtered-scan bounds (the HNSW build and search effort
    every HNSW store shares is Settings.hnsw_*; the sweeps are in docs/BENCHMARKS.md)."""

    vector_type: str = "vector"
    quantization: str = "none"
    #: binary quantization re-ranks n x this many Hamming candidates by exact cosine
    rerank_factor: int = 10
    #: filtered ANN queries keep walking the graph until they have n rows (pgvector >= 0.8)
    iterative_scan: str = "relaxed_order"
    max_scan_tuples: int = 20_000
    #: a table of at most this many chunks is searched exactly (no graph walk), as Qdrant's
    #: full_scan_threshold does: HNSW misses neighbours now and then even on a few thousand
    #: chunks (measured on candle-fire's 2,542-chunk conformance corpus: 0-4 of 330 stage lists
    #: per build at ef 200), while an exact scan there costs a few ms per sub-query; 0 = never
    full_scan_rows: int = 5_000

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("CANDLEFIRE_PG_VECTOR_TYPE", self.vector_type, PG_VECTOR_TYPES),
            ("CANDLEFIRE_PG_QUANTIZATION", self.quantization, PG_QUANTIZATIONS),
            ("CANDLEFIRE_HNSW_ITERATIVE_SCAN", self.iterative_scan, PG_ITERATIVE_SCANS),
        ):
            check_choice(name, value, allowed)
        if self.vector_type == "halfvec" and self.quantization == "binary":
            raise ValueError(
                "CANDLEFIRE_PG_VECTOR_TYPE=halfvec (a half-precision HNSW index) and "
                "CANDLEFIRE_PG_QUANTIZATION=binary (a binary-quantized one) choose two different "
                "ANN indexes: set one of them"
            )
        check_between("CANDLEFIRE_PG_FULL_SCAN_ROWS", self.full_scan_rows, 0, 1_000_000_000)
        check_between("CANDLEFIRE_PG_RERANK_FACTOR", self.rerank_factor, 1, 1_000_000)
        check_between("CANDLEFIRE_HNSW_MAX_SCAN_TUPLES", self.max_scan_tuples, 1, 1_000_000)

    @classmethod
    def from_env(cls) -> PgAnnSettings:
        return cls(
            vector_type=env_str("CANDLEFIRE_PG_VECTOR_TYPE", cls.vector_type).lower(),
            quantization=env_str("CANDLEFIRE_PG_QUANTIZATION", cls.quantization).lower(),
            rerank_factor=env_int("CANDLEFIRE_PG_RERANK_FACTOR", cls.rerank_factor),
            iterative_scan=env_str("CANDLEFIRE_HNSW_ITERATIVE_SCAN", cls.iterative_scan).lower(),
            max_scan_tuples=env_int("CANDLEFIRE_HNSW_MAX_SCAN_TUPLES", cls.max_scan_tuples),
            full_scan_rows=env_int("CANDLEFIRE_PG_FULL_SCAN_ROWS", cls.full_scan_rows),
        )


#: gate threshold -> (environment variable, lowest allowed, highest allowed). The ranges keep
#: a gate from being switched off from the environment (an overlap of 0, a p95 ratio of 1000).
THRESHOLD_RANGES: dict[str, tuple[str, float, float]] = {
    "grounding_agreement": ("CANDLEFIRE_PARITY_GROUNDING", 0.9, 1.0),
    "mean_overlap": ("CANDLEFIRE_PARITY_MEAN_OVERLAP", 0.7, 1.0),
    "p95_ratio": ("CANDLEFIRE_PARITY_P95_RATIO", 1.0, 3.0),
    "ann_recall": ("CANDLEFIRE_PARITY_ANN_RECALL", 0.8, 1.0),
    "min_corpus_chunks": ("CANDLEFIRE_PARITY_MIN_CHUNKS", 10, 1_000_000_000),
    "min_queries_with_results": ("CANDLEFIRE_PARITY_MIN_QUERIES", 5, 100_000),
    # 0 = live evidence not required; when required, a window with fewer comparisons fails
    "min_shadow_queries": ("CANDLEFIRE_PARITY_MIN_SHADOW_QUERIES", 0, 1_000_000),
    "shadow_error_rate": ("CANDLEFIRE_PARITY_SHADOW_ERROR_RATE", 0.0, 0.2),
}


@dataclass(frozen=True)
class IngestLimits:
    """Bounds enforced while a drop is streamed, so memory stays bounded whatever the input."""

    #: Bytes of one record: a JSONL line, or a MEDLINE record from its start to its end tag.
    #: A record past it is rejected (`too_large`) without being held in memory.
    max_record_bytes: int = 5 * 1024 * 1024
    #: Characters of one XML text node (an ArticleTitle, an AbstractText ...); past it the
    #: record is rejected.
    max_element_chars: int = 1_000_000
    #: Decompressed bytes of one drop file; past it the whole drop is refused (a bound on the
    #: work a decompression bomb can cause -- memory is bounded by the two limits above).
    max_drop_bytes: int = 4 * 1024**3

    @classmethod
    def from_env(cls) -> IngestLimits:
        return cls(
            max_record_bytes=env_positive_int("CANDLEFIRE_MAX_RECORD_BYTES", cls.max_record_bytes),
            max_element_chars=env_positive_int(
                "CANDLEFIRE_MAX_ELEMENT_CHARS", cls.max_element_chars
            ),
            max_drop_bytes=env_positive_int("CANDLEFIRE_MAX_DROP_BYTES", cls.max_drop_bytes),
        )


@dataclass(frozen=True)
class ParityThresholds:
    """The thresholds of the gates that decide the flip to pgvector; out of range = error."""

    grounding_agreement: float = 1.0
    mean_overlap: float = 0.9
    p95_ratio: float = 1.5
    #: pgvector's chunk-level recall@15 against the exact oracle (0.984 at 62k, semantic ef 200)
    ann_recall: float = 0.95
    #: evidence: every store holds at least this many chunks (the demo's first drop has ~600)
    min_corpus_chunks: int = 100
    #: evidence: this many queries return results on every store (the committed set has 58)
    min_queries_with_results: int = 20
    #: live evidence: the shadow window holds at least this many comparisons (0: not required)
    min_shadow_queries: int = 0
    #: live evidence: at most this share of shadow reads may fail
    shadow_error_rate: float = 0.01

    def __post_init__(self) -> None:
        for name, (variable, low, high) in THRESHOLD_RANGES.items():
            value = getattr(self, name)
            # NaN fails both comparisons, so it is refused too
            if isinstance(value, bool) or not (low <= value <= high):
                raise ValueError(
                    f"{variable} (parity gate {name}) must be between {low:g} and {high:g}, "
                    f"got {value!r}"
                )

    @classmethod
    def from_env(cls) -> ParityThresholds:
        variables = {name: variable for name, (variable, _, _) in THRESHOLD_RANGES.items()}
        return cls(**env_fields(cls, variables))
