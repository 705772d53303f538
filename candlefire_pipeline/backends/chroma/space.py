"""The distance space of a Chroma collection this project attaches to: cosine, or refused.

Every store and the parity report compare cosine similarities (max(0, 1 - distance)). Chroma
creates a collection with L2 distance unless told otherwise, and a collection's space cannot be
changed afterwards, so a collection made elsewhere with the default (a common mistake) would
give scores on another scale that the retriever would silently rank and compare with pgvector's.
"""

from __future__ import annotations

from candlefire_pipeline.backends.base import DimensionMismatchError

#: What Chroma uses when a collection is created without a space.
CHROMA_DEFAULT_SPACE = "l2"


class CollectionSpaceError(DimensionMismatchError):
    """An existing Chroma collection measures distance in another space than cosine."""


def collection_space(collection) -> str:
    """The collection's distance space: its configuration, else legacy metadata, else L2."""
    config = getattr(collection, "configuration_json", None) or {}
    for index in ("hnsw", "spann"):  # spann: distributed / cloud Chroma
        space = (config.get(index) or {}).get("space")
        if space:
            return str(space)
    legacy = (getattr(collection, "metadata", None) or {}).get("hnsw:space")
    return str(legacy or CHROMA_DEFAULT_SPACE)


def check_cosine(collection, where: str) -> None:
    """Refuse a collection whose space is not cosine, saying how to get one that is."""
    space = collection_space(collection)
    if space == "cosine":
        return
    default = " (Chroma's default when a collection is created without a space)" if (
        space == CHROMA_DEFAULT_SPACE
    ) else ""  # fmt: skip
    raise CollectionSpaceError(
        f"Chroma collection {collection.name!r} at {where} uses the {space!r} distance{default}, "
        "but every store here compares cosine similarity: its scores would be silently wrong, "
        "so it is not used. Chroma cannot change a collection's space: set "
        "CANDLEFIRE_CHROMA_COLLECTION to a new name (created with cosine on first use) and "
        "re-apply every batch to it (`candlefire repair --store chroma --apply`), or delete this "
        "collection if nothing else reads it."
    )
