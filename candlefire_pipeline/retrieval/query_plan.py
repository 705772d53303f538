"""What one request searches for, built as candle-fire's app builds it around its retriever.

keyword terms = the entity names as given, then the query text's identifier-like tokens
(`\\b[A-Za-z]+\\d+\\w*|\\b[A-Z]{2,}\\d*\\w*`, 3+ characters), duplicates dropped; focus terms =
keyword terms that are not generic disease words. candle-fire collects the tokens in a Python set,
whose order changes from one process to the next; here they keep their order in the text. The
order only decides between rows of exactly equal similarity, which are ordered by id anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from candlefire_pipeline.retrieval.variants import term_variants

_ENTITY_TOKEN = re.compile(r"\b[A-Za-z]+\d+\w*|\b[A-Z]{2,}\d*\w*")
_MIN_TOKEN_CHARS = 3
#: Disease descriptors grounded all over an ALS corpus: never a query's focus (candle-fire's).
_GENERIC_EXACT = frozenset(
    {"als", "mnd", "mnds", "ftd", "als/ftd", "disease", "neurodegeneration", "therapy",
     "treatment"}
)  # fmt: skip
_GENERIC_SUBSTRINGS = ("amyotrophic", "lateral sclerosis", "motor neuron")


def query_tokens(text: str) -> list[str]:
    """Identifier-like tokens of the query text (drug codes, gene ids, acronyms), in order."""
    found = (tok for tok in _ENTITY_TOKEN.findall(text) if len(tok) >= _MIN_TOKEN_CHARS)
    return list(dict.fromkeys(found))


def is_generic_term(term: str) -> bool:
    """Whether a term is a disease-generic word (ALS, MND, "motor neuron disease", ...)."""
    lowered = term.lower().strip()
    return lowered in _GENERIC_EXACT or any(part in lowered for part in _GENERIC_SUBSTRINGS)


def searched_names(entity_names: Sequence[str], cap: int) -> tuple[str, ...]:
    """The entity names searched: the first `cap` as given, blank ones and repeats left out
    (candle-fire embeds a blank name too and adds whatever is nearest to the empty string)."""
    names = _strings(entity_names, "entity names")
    return tuple(dict.fromkeys(name for name in names[:cap] if name.strip()))


def distinct_variants(terms: Iterable[str]) -> list[str]:
    """The spelling variants of every non-blank term, each once, in order."""
    terms = _strings(terms, "terms")
    return list(dict.fromkeys(v for t in terms if t.strip() for v in term_variants(t)))


def _strings(values: Iterable[str], what: str) -> list[str]:
    values = list(values)
    bad = [v for v in values if not isinstance(v, str)]
    if bad:
        raise TypeError(f"{what} must be strings, got {bad[0]!r}")
    return values


@dataclass(frozen=True)
class QueryPlan:
    """The texts one retrieve() embeds and the terms it searches and grounds."""

    query: str
    #: the entity names searched: the first `entity_cap` as given, blank ones and repeats left out
    entity_names: tuple[str, ...]
    #: entity names then query tokens (or the given terms), duplicates dropped
    keyword_terms: tuple[str, ...]
    #: keyword terms that are not generic disease words
    focus_terms: tuple[str, ...]
    #: every non-blank keyword term -> its spelling variants
    variants: dict[str, tuple[str, ...]]

    @classmethod
    def build(
        cls,
        query: str,
        entity_names: Sequence[str] = (),
        terms: Sequence[str] | None = None,
        entity_cap: int = 12,
    ) -> QueryPlan:
        """The plan of one request; `terms` None takes the tokens of the query text (the app's
        rule), given terms replace them (recorded query sets name them)."""
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be non-empty text, got {query!r}")
        names = _strings(entity_names, "entity names")
        tokens = query_tokens(query) if terms is None else _strings(terms, "terms")
        keyword_terms = tuple(dict.fromkeys(names + tokens))
        return cls(
            query=query,
            entity_names=searched_names(names, entity_cap),
            keyword_terms=keyword_terms,
            focus_terms=tuple(t for t in keyword_terms if t.strip() and not is_generic_term(t)),
            variants={t: tuple(term_variants(t)) for t in keyword_terms if t.strip()},
        )

    @property
    def distinct_variants(self) -> list[str]:
        return distinct_variants(self.keyword_terms)

    def texts(self) -> list[str]:
        """Every text the request embeds, once: the query, entity names, keyword variants."""
        return list(dict.fromkeys([self.query, *self.short_texts()]))

    def short_texts(self) -> list[str]:
        """The entity names and keyword variants: the texts that recur across requests."""
        return list(dict.fromkeys([*self.entity_names, *self.distinct_variants]))
