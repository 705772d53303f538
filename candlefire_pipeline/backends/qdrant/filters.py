"""Qdrant filters for the shared Filter and for the exact substring contract.

The contract is Chroma's `$contains`: an exact, case-sensitive substring of the document.
`MatchSubstring` (byte-wise, case-sensitive on keyword values) is exactly that and is the
condition every substring filter holds. `MatchText` is token-based (the word tokenizer lowercases
and splits on every non-alphanumeric character), so on its own it answers another question:
"SPG302" never matches "SPG302a", "spg302" matches "SPG302". It is added only as a NARROWING
condition beside the exact one, and only with tokens every document containing the variant is
proven to hold (narrowing_tokens), so the server can start from the full-text index without
losing a match.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from qdrant_client import models

from candlefire_pipeline.backends.base import Filter

#: The payload field holding the chunk text.
DOCUMENT = "document"
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")

#: Payload indexes of a server collection: what the shared Filter and the narrowing use.
PAYLOAD_INDEXES: dict[str, object] = {
    "pmid": models.PayloadSchemaType.KEYWORD,
    "chunk_index": models.PayloadSchemaType.INTEGER,
    "year": models.PayloadSchemaType.INTEGER,
    "has_full_text": models.PayloadSchemaType.BOOL,
    # the word tokenizer with its defaults (lowercase, no stemming, stopwords or folding): the
    # tokenizer narrowing_tokens reasons about
    DOCUMENT: models.TextIndexParams(
        type=models.TextIndexType.TEXT, tokenizer=models.TokenizerType.WORD, lowercase=True
    ),
}


def narrowing_tokens(variant: str) -> tuple[str, ...]:
    """Word tokens that every document containing `variant` holds as whole tokens.

    A run of ASCII letters/digits with a separator on both sides inside the variant stays a
    whole token wherever the variant occurs; the first and last runs do not ("SPG-302" occurs in
    "XSPG-3021", whose tokens are "xspg" and "3021"). Non-ASCII variants get no narrowing:
    tokenizers disagree on which non-ASCII characters are letters.
    """
    if not variant.isascii():
        return ()
    inner = [
        m.group() for m in _ASCII_WORD.finditer(variant) if m.start() > 0 and m.end() < len(variant)
    ]
    return tuple(dict.fromkeys(inner))


def _field(key: str, **kwargs) -> models.FieldCondition:
    return models.FieldCondition(key=key, **kwargs)


def where_conditions(where: Filter) -> list[models.Condition]:
    """The shared Filter as `must` conditions (empty: nothing filters)."""
    out: list[models.Condition] = []
    if where.pmids is not None:
        out.append(_field("pmid", match=models.MatchAny(any=list(where.pmids))))
    if where.abstract_only:
        out.append(_field("chunk_index", match=models.MatchValue(value=0)))
    if where.min_year is not None or where.max_year is not None:
        bounds = models.Range(gte=where.min_year, lte=where.max_year)
        out.append(_field("year", range=bounds))
    if where.has_full_text is not None:
        out.append(
            _field("has_full_text", match=models.MatchValue(value=bool(where.has_full_text)))
        )
    return out


def variant_condition(variant: str, narrow: bool) -> models.Condition:
    """The document contains `variant` exactly; narrowed by whole tokens when proven complete."""
    exact = _field(DOCUMENT, match=models.MatchSubstring(substring=variant))
    tokens = narrowing_tokens(variant) if narrow else ()
    if not tokens:
        return exact
    # exact first: local mode checks conditions in order and has no index to start from
    narrowing = [_field(DOCUMENT, match=models.MatchText(text=t)) for t in tokens]
    return models.Filter(must=[exact, *narrowing])


def qdrant_filter(
    where: Filter, variants: Sequence[str] = (), narrow: bool = False
) -> models.Filter | None:
    """The shared Filter, and "contains any variant" when variants are given; None: no filter."""
    must = where_conditions(where)
    if variants:
        must.append(models.Filter(should=[variant_condition(v, narrow) for v in variants]))
    return models.Filter(must=must) if must else None


def pmid_filter(pmids: Sequence[str]) -> models.Filter:
    return models.Filter(must=[_field("pmid", match=models.MatchAny(any=list(pmids)))])
