"""The vector-store protocol every backend implements, and the shapes it speaks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypedDict, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

#: Columns of a normalized result row, in order (candle-fire's _parse_raw shape + chunk_id).
RESULT_FIELDS = (
    "chunk_id", "pmid", "title", "year", "doi", "section", "chunk_index",
    "citation_count", "entity_names", "has_full_text", "document", "similarity",
)  # fmt: skip


#: Called by replace_papers with the running count of rows written (long loads report progress).
RowProgress = Callable[[int], None]


class ResultRow(TypedDict):
    chunk_id: str
    pmid: str
    title: str
    year: int | None
    doi: str
    section: str
    chunk_index: int
    citation_count: int
    entity_names: str
    has_full_text: bool
    document: str
    similarity: float | None  # 1 - cosine distance; None for plain fetches


class Grounding(NamedTuple):
    """Whether a term (any of its variants) is written in some chunk, and in some abstract."""

    corpus: bool
    abstract: bool


class DimensionMismatchError(ValueError):
    """The store was built with another model or dimension than the one now in use."""


#: Retrieval stages a semantic_candidates call may name, so an ANN backend can spend the effort
#: each needs (the entity fan-out wants 10 hits per name, the semantic stage a deeper list).
ANN_STAGES = ("semantic", "entities")


@dataclass(frozen=True)
class Filter:
    """Metadata filter shared by every read method; None fields do not filter."""

    pmids: tuple[str, ...] | None = None
    abstract_only: bool = False  # chunk_index == 0
    min_year: int | None = None
    max_year: int | None = None
    has_full_text: bool | None = None


@runtime_checkable
class VectorBackend(Protocol):
    """A chunk store with exact-substring and cosine ANN search."""

    name: str

    # write side -----------------------------------------------------------------
    def ensure_schema(self, model_id: str, dim: int) -> None:
        """Fix model and dim on first use; DimensionMismatchError on a later change."""

    def replace_papers(self, rows: pa.Table, progress: RowProgress | None = None) -> int:
        """Delete every chunk of each pmid in rows, insert rows; return rows written.

        `progress`, when given, is called with the running count of rows written.
        """

    def delete_papers(self, pmids: Sequence[str]) -> int:
        """Delete every chunk of these papers; return chunks deleted."""

    # inventory ------------------------------------------------------------------
    def count(self) -> int: ...

    def paper_hashes(self, pmids: Sequence[str] | None = None) -> dict[str, str]:
        """pmid -> paper_hash of the stored version (of these papers only, when given)."""

    def chunk_hashes(self) -> dict[str, str]:
        """chunk_id -> content_hash of every stored chunk (consistency checks)."""

    def paper_chunks(self, pmids: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        """pmid -> {chunk_id: content_hash} of the stored chunks (of these papers, when given).

        Exactly what a paper holds now, stale and left-over chunks included: how a write that
        was cut short, or a manual edit, is told apart from a paper that is up to date.
        """

    def has_paper(self, pmid: str) -> bool: ...

    def stored_model(self) -> tuple[str, int] | None:
        """(model_id, dim) fixed by the first write, or None for an empty store."""

    # read side ------------------------------------------------------------------
    def semantic_candidates(
        self,
        vectors: np.ndarray,
        n: int,
        where: Filter | None = None,
        stage: str | None = None,
        texts: Sequence[str] | None = None,
    ) -> list[list[ResultRow]]:
        """Top-n chunks by cosine similarity per query vector (one round trip), best first.

        `stage` (one of ANN_STAGES, or None for "semantic") is a hint: an approximate backend may
        tune its search effort to it; exact backends ignore it. `texts`, one per vector, are
        what the vectors embed (entity names): a store that keeps answers by text may use them.
        """

    def substring_candidates(
        self, variants: Sequence[str], vectors: np.ndarray, n: int, where: Filter | None = None
    ) -> list[list[ResultRow]]:
        """Per variant i, the top-n chunks whose document contains variants[i] (exact substring,
        the store's substring mode) by cosine similarity to vectors[i], best first; in one round
        trip where the store allows. Exact: every matching chunk is ranked, no graph walk."""

    def contains(self, variants: Sequence[str], where: Filter | None = None) -> bool:
        """Whether any chunk's document contains any variant (grounding)."""

    def ground_terms(self, terms: Sequence[Sequence[str]]) -> list[Grounding]:
        """Per term (its variants), whether any chunk holds a variant, and any abstract chunk
        (chunk_index 0); every term of a request at once."""

    def fetch(self, where: Filter) -> list[ResultRow]:
        """Chunks matching the filter, ordered by (pmid, chunk_index); similarity None."""

    def close(self) -> None: ...
