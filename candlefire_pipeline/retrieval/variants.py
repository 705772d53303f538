"""Spelling variants of drug codes and gene ids ("SPG302" / "SPG 302" / "SPG-302").

candle-fire's rule, reproduced exactly (docs: ARCHITECTURE.md "term variants"):

1. the term as given (not stripped);
2. the collapsed form: every single whitespace character or hyphen that sits between an ASCII
   letter and a digit, in either order, is removed ("SPG - 302" has no single separator there
   and stays as it is);
3. the collapsed form with a space, then with a hyphen, inserted wherever an ASCII letter is
   directly followed by a digit -- never digit -> letter ("G93A" -> "G 93A", "G-93A").

Duplicates are dropped, first occurrence kept. A letter is ASCII only ("Aβ42" has no boundary);
a digit and a whitespace character are what Python's `re` calls \\d and \\s (Unicode-aware),
as in candle-fire's own regular expressions.
"""

from __future__ import annotations

import re

_ASCII_LETTER = "[A-Za-z]"
_SEPARATOR_AT_BOUNDARY = re.compile(
    rf"(?<={_ASCII_LETTER})[\s-](?=\d)|(?<=\d)[\s-](?={_ASCII_LETTER})"
)
_LETTER_THEN_DIGIT = re.compile(rf"(?<={_ASCII_LETTER})(?=\d)")


def term_variants(term: str) -> list[str]:
    """The term, collapsed, then spaced and hyphenated at letter -> digit boundaries; deduped."""
    if not isinstance(term, str) or not term.strip():
        raise ValueError(f"a grounding/keyword term must be non-empty text, got {term!r}")
    collapsed = _SEPARATOR_AT_BOUNDARY.sub("", term)
    candidates = (
        term,
        collapsed,
        _LETTER_THEN_DIGIT.sub(" ", collapsed),
        _LETTER_THEN_DIGIT.sub("-", collapsed),
    )
    return list(dict.fromkeys(candidates))


def term_matches_text(term: str, text: str) -> bool:
    """Whether any variant of term occurs in text, ignoring case."""
    haystack = text.casefold()
    return any(variant.casefold() in haystack for variant in term_variants(term))
