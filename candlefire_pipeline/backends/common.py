"""Behaviour every backend shares: row validation, the model contract, patterns, result rows."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from candlefire_pipeline.backends.base import (
    ANN_STAGES,
    DimensionMismatchError,
    Filter,
    Grounding,
    ResultRow,
)
from candlefire_pipeline.stores import SUBSTRING_MODES

if TYPE_CHECKING:
    import pyarrow as pa

# pyarrow (and the corpus schema) load in the functions that take a rows table: the write side.
# The app's read path imports this module and must not load pyarrow (docs/APP.md).

#: Text metadata a chunk may lack; stored as "" so every backend returns the same value.
OPTIONAL_TEXT = ("section", "title", "doi", "entity_names", "mesh_terms")
#: Columns that must be present and non-null on every row.
REQUIRED = (
    "chunk_id", "pmid", "chunk_index", "has_full_text", "document",
    "content_hash", "paper_hash", "batch_key", "model_id", "embedding",
)  # fmt: skip


class BackendUnavailableError(RuntimeError):
    """The store could not be reached or opened; the message never holds a password."""


class StoreFullError(RuntimeError):
    """The store's disk is full: the write was rolled back whole; a retry fails the same way
    until space is freed (never transient)."""


def check_substring_mode(mode: str) -> str:
    if mode not in SUBSTRING_MODES:
        raise ValueError(f"substring_mode must be one of {SUBSTRING_MODES}, got {mode!r}")
    return mode


def check_case_sensitive_mode(mode: str, store: str, feature: str) -> str:
    """A store whose substring match is case-sensitive only honours 'like'."""
    if check_substring_mode(mode) == "ilike":
        raise ValueError(
            f"{feature} is case-sensitive: substring_mode 'ilike' cannot be honored by the "
            f"{store} backend (use 'like', or the pgvector/memory backends for ilike)"
        )
    return mode


# -- the model contract ----------------------------------------------------------------------


def check_model(stored: tuple[str, int] | None, model_id: str, dim: int) -> None:
    """Raise DimensionMismatchError when (model_id, dim) differs from what the store holds."""
    if not model_id:
        raise ValueError("model_id must be a non-empty string")
    if not isinstance(dim, int | np.integer) or dim <= 0:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    if stored is not None and (stored[0], int(stored[1])) != (model_id, int(dim)):
        raise DimensionMismatchError(
            f"store was built with model {stored[0]!r} ({stored[1]}-dim) but "
            f"{model_id!r} ({dim}-dim) is in use now; rebuild the store (reset it) to switch"
        )


def check_dim(stored: tuple[str, int] | None, dim: int) -> None:
    """Raise DimensionMismatchError when vectors of `dim` cannot go into or query this store."""
    if stored is not None and int(stored[1]) != int(dim):
        raise DimensionMismatchError(
            f"vectors have {dim} dimensions but the store holds {stored[1]}-dim vectors of "
            f"model {stored[0]!r}"
        )


def rows_dim(rows: pa.Table) -> int:
    """Vector dimension of a rows table (its embedding column must be fixed-size float32)."""
    import pyarrow as pa

    if "embedding" not in rows.column_names:
        raise ValueError("rows table has no 'embedding' column")
    kind = rows.schema.field("embedding").type
    if not pa.types.is_fixed_size_list(kind) or not pa.types.is_float32(kind.value_type):
        raise ValueError(f"embedding must be fixed_size_list<float32>[dim], got {kind}")
    return kind.list_size


def rows_model(rows: pa.Table) -> str:
    """The single model id of a validated rows table."""
    import pyarrow.compute as pc

    models = pc.unique(rows["model_id"]).to_pylist()
    if len(models) != 1:
        raise ValueError(f"rows must come from exactly one model, got {models}")
    return models[0]


def rows_to_write(
    rows: pa.Table, stored_model: Callable[[], tuple[str, int] | None]
) -> pa.Table | None:
    """replace_papers' common start: None for an empty batch (after the dimension check, so a
    wrong-sized empty batch still fails), else the validated rows."""
    if rows.num_rows == 0:
        check_dim(stored_model(), rows_dim(rows))
        return None
    return validate_rows(rows)


def validate_rows(rows: pa.Table) -> pa.Table:
    """Rows conformed to store_schema(dim), optional text filled with "", or a clear error."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from candlefire_pipeline.corpus.schema import store_schema

    dim = rows_dim(rows)
    schema = store_schema(dim)
    missing = [name for name in schema.names if name not in rows.column_names]
    if missing:
        raise ValueError(f"rows table lacks store_schema columns: {', '.join(missing)}")
    try:
        rows = rows.select(schema.names).cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"rows table does not fit store_schema({dim}): {exc}") from exc
    for name in REQUIRED:
        nulls = rows[name].null_count
        if nulls:
            raise ValueError(f"column {name!r} has {nulls} null value(s); it is required")
    if pc.any(pc.equal(pc.utf8_length(rows["pmid"]), 0)).as_py():
        raise ValueError("column 'pmid' has empty value(s)")
    if pc.any(pc.equal(pc.utf8_length(rows["chunk_id"]), 0)).as_py():
        raise ValueError("column 'chunk_id' has empty value(s)")
    if len(pc.unique(rows["chunk_id"])) != rows.num_rows:
        raise ValueError("column 'chunk_id' has duplicates within one replace_papers call")
    _check_vectors(embedding_matrix(rows), "rows")
    return _fill_optional(rows)


def _fill_optional(rows: pa.Table) -> pa.Table:
    import pyarrow.compute as pc

    for name in OPTIONAL_TEXT:
        index = rows.schema.get_field_index(name)
        rows = rows.set_column(index, name, pc.fill_null(rows[name], ""))
    index = rows.schema.get_field_index("citation_count")
    return rows.set_column(index, "citation_count", pc.fill_null(rows["citation_count"], 0))


def embedding_matrix(rows: pa.Table) -> np.ndarray:
    """The embedding column as a (rows x dim) float32 array."""
    dim = rows_dim(rows)
    column = rows["embedding"].combine_chunks()
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(flat, dtype=np.float32).reshape(len(column), dim)


def _check_vectors(matrix: np.ndarray, what: str) -> None:
    if not np.isfinite(matrix).all():
        raise ValueError(f"{what}: vectors contain NaN or infinite values")
    if matrix.size and not matrix.any(axis=1).all():
        raise ValueError(f"{what}: a zero vector has no cosine direction")


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to length 1 (float32); einsum is ~10x faster than np.linalg.norm here."""
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float64))
    return (matrix / norms[:, None]).astype(np.float32)


def query_matrix(vectors: np.ndarray, stored: tuple[str, int] | None) -> np.ndarray:
    """Query vectors as a C-contiguous (q x dim) float32 array; stored None skips the dim check."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2:
        raise ValueError(f"query vectors must be 1-D or 2-D, got shape {matrix.shape}")
    if stored is not None:
        check_dim(stored, matrix.shape[1])
    _check_vectors(matrix, "query")
    return np.ascontiguousarray(matrix)


def check_stage(stage: str | None) -> str:
    """The ANN stage a semantic query serves ("semantic" when not named)."""
    if stage is None:
        return "semantic"
    if stage not in ANN_STAGES:
        raise ValueError(f"stage must be one of {ANN_STAGES} or None, got {stage!r}")
    return stage


def check_n(n: int) -> int:
    if not isinstance(n, int | np.integer) or n <= 0:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    return int(n)


def group_chunks(rows: Iterable[tuple[str, str, str]]) -> dict[str, dict[str, str]]:
    """(pmid, chunk_id, content_hash) rows -> pmid -> {chunk_id: content_hash}."""
    grouped: dict[str, dict[str, str]] = {}
    for pmid, chunk_id, digest in rows:
        grouped.setdefault(pmid, {})[chunk_id] = digest
    return grouped


# -- substring search ------------------------------------------------------------------------


def clean_variants(variants: Sequence[str] | str) -> list[str]:
    """Distinct variants in order; an empty or non-string variant is an error, not a match-all."""
    if isinstance(variants, str):
        raise TypeError("variants must be a sequence of strings, not one string")
    out: list[str] = []
    for variant in variants:
        if not isinstance(variant, str) or not variant:
            raise ValueError(f"substring variants must be non-empty strings, got {variant!r}")
        if variant not in out:
            out.append(variant)
    return out


def check_variant_queries(variants: Sequence[str] | str, vectors: np.ndarray) -> list[str]:
    """The variants of a substring_candidates call, one query vector each (not deduplicated:
    answer i belongs to variants[i])."""
    if isinstance(variants, str):
        raise TypeError("variants must be a sequence of strings, not one string")
    variants = list(variants)
    for variant in variants:
        if not isinstance(variant, str) or not variant:
            raise ValueError(f"substring variants must be non-empty strings, got {variant!r}")
    shape = np.shape(vectors)
    if variants and (len(shape) != 2 or shape[0] != len(variants)):
        raise ValueError(
            f"substring_candidates needs one query vector per variant: {len(variants)} variants, "
            f"vectors of shape {shape}"
        )
    return variants


def check_texts(texts: Sequence[str] | None, count: int) -> list[str] | None:
    """The texts of a semantic_candidates call: one non-empty string per query vector."""
    if texts is None:
        return None
    if isinstance(texts, str):
        raise TypeError("texts must be a sequence of strings, not one string")
    texts = list(texts)
    if len(texts) != count or not all(isinstance(t, str) and t for t in texts):
        raise ValueError(f"texts must be {count} non-empty strings, one per query vector")
    return texts


def grounding_of(variants: Sequence[str], facts: Mapping[str, tuple[bool, bool]]) -> Grounding:
    """A term's grounding from its variants' (held, held by an abstract) facts."""
    return Grounding(any(facts[v][0] for v in variants), any(facts[v][1] for v in variants))


def ground_by_contains(backend, terms: Sequence[Sequence[str]]) -> list[Grounding]:
    """ground_terms for a store without a batched form: two contains() per term."""
    out = []
    for variants in terms:
        variants = clean_variants(variants)
        abstract = bool(variants) and backend.contains(variants, Filter(abstract_only=True))
        corpus = abstract or (bool(variants) and backend.contains(variants))
        out.append(Grounding(corpus, abstract))
    return out


def like_pattern(variant: str) -> str:
    r"""'%variant%' with LIKE's metacharacters escaped for ESCAPE '\'."""
    escaped = variant.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def fold_case(text: str) -> str:
    """Lower-case like Postgres lower() under a UTF-8 libc locale (simple, per-code-point)."""
    # U+0130 is the one letter whose full lower-case mapping (Python) differs from the simple one.
    return text.replace("\u0130", "i").lower()


def substring_matcher(variants: Iterable[str], mode: str):
    """A predicate on a document with exactly the semantics of LIKE / ILIKE '%v%'."""
    wanted = list(variants)
    if mode == "ilike":
        lowered = [fold_case(v) for v in wanted]
        return lambda doc: any(v in fold_case(doc) for v in lowered)
    return lambda doc: any(v in doc for v in wanted)


# -- filters and results ---------------------------------------------------------------------


def matches_nothing(where: Filter | None) -> bool:
    """An explicit empty pmid list, or an empty year range, selects no chunk."""
    if where is None:
        return False
    if where.pmids is not None and len(where.pmids) == 0:
        return True
    return (
        where.min_year is not None
        and where.max_year is not None
        and where.min_year > where.max_year
    )


def check_filter(where: Filter | None) -> Filter:
    where = where or Filter()
    if isinstance(where.pmids, str):
        raise TypeError("Filter.pmids must be a tuple of pmids, not one string")
    return where


def result_row(
    chunk_id: str, document: str, meta: Mapping[str, Any], similarity: float | None
) -> ResultRow:
    """One normalized result row from a chunk's id, document and metadata."""
    year = meta.get("year")
    return ResultRow(
        chunk_id=str(chunk_id),
        pmid=str(meta["pmid"]),
        title=meta.get("title") or "",
        year=int(year) if year is not None else None,
        doi=meta.get("doi") or "",
        section=meta.get("section") or "",
        chunk_index=int(meta["chunk_index"]),
        citation_count=int(meta.get("citation_count") or 0),
        entity_names=meta.get("entity_names") or "",
        has_full_text=bool(meta["has_full_text"]),
        document=document,
        similarity=None if similarity is None else float(similarity),
    )


def sort_hits(rows: list[ResultRow]) -> list[ResultRow]:
    """Best similarity first; ties broken by chunk_id so every backend agrees."""
    return sorted(rows, key=lambda row: (-(row["similarity"] or 0.0), row["chunk_id"]))


def sort_fetched(rows: list[ResultRow]) -> list[ResultRow]:
    return sorted(rows, key=lambda row: (row["pmid"], row["chunk_index"], row["chunk_id"]))
