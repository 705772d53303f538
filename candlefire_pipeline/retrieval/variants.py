"""Spelling variants of drug codes and gene ids ("SPG302" / "SPG 302" / "SPG-302")."""

from __future__ import annotations

import re

# A letter is any Unicode letter (\w minus digits and underscore).
_LETTER = r"[^\W\d_]"
_SEPARATED_BOUNDARY = re.compile(rf"(?<={_LETTER})[ -]+(?=\d)|(?<=\d)[ -]+(?={_LETTER})")
_BOUNDARY = re.compile(rf"(?<={_LETTER})(?=\d)|(?<=\d)(?={_LETTER})")


def term_variants(term: str) -> list[str]:
    """The term, then collapsed, spaced and hyphenated at letter-digit boundaries; deduped."""
    if not isinstance(term, str) or not term.strip():
        raise ValueError(f"a grounding/keyword term must be non-empty text, got {term!r}")
    original = term.strip()
    collapsed = _SEPARATED_BOUNDARY.sub("", original)
    candidates = (
        original,
        collapsed,
        _BOUNDARY.sub(" ", collapsed),
        _BOUNDARY.sub("-", collapsed),
    )
    return list(dict.fromkeys(candidates))


def term_matches_text(term: str, text: str) -> bool:
    """Whether any variant of term occurs in text, ignoring case."""
    haystack = text.casefold()
    return any(variant.casefold() in haystack for variant in term_variants(term))
