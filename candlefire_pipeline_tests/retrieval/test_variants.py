"""Term variants: the spellings every keyword and grounding check tries."""

from __future__ import annotations

import pytest

from candlefire_pipeline.retrieval.variants import term_matches_text, term_variants


# Expected values worked out by hand from candle-fire's rule (retrieval/variants.py docstring):
# the term as given, the collapsed form, then " " and "-" inserted at ASCII-letter -> digit only.
@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("SPG302", ["SPG302", "SPG 302", "SPG-302"]),
        ("SPG 302", ["SPG 302", "SPG302", "SPG-302"]),  # spaced form == the term: dropped
        ("SPG-302", ["SPG-302", "SPG302", "SPG 302"]),
        ("TDP-43", ["TDP-43", "TDP43", "TDP 43"]),
        ("SOD1", ["SOD1", "SOD 1", "SOD-1"]),
        # mutation names: only G|9 is letter -> digit; 3|A is digit -> letter and stays joined
        ("G93A", ["G93A", "G 93A", "G-93A"]),
        ("A4V", ["A4V", "A 4V", "A-4V"]),
        ("C9orf72", ["C9orf72", "C 9orf 72", "C-9orf-72"]),
        # the hyphen sits between 1 (digit) and G (letter): collapsed away, never put back there
        ("SOD1-G93A", ["SOD1-G93A", "SOD1G93A", "SOD 1G 93A", "SOD-1G-93A"]),
        # A-A is letter-letter: nothing collapses; K|3 is the only letter -> digit boundary
        ("3K3A-APC", ["3K3A-APC", "3K 3A-APC", "3K-3A-APC"]),
        ("AB-12-CD34", ["AB-12-CD34", "AB12CD34", "AB 12CD 34", "AB-12CD-34"]),
        ("A-1-B-2", ["A-1-B-2", "A1B2", "A 1B 2", "A-1B-2"]),
        ("anti-TDP43", ["anti-TDP43", "anti-TDP 43", "anti-TDP-43"]),
        ("IL-6", ["IL-6", "IL6", "IL 6"]),
        # digit -> letter only: nothing is inserted; a separator there is only removed
        ("1A", ["1A"]),
        ("1 A", ["1 A", "1A"]),
        # two separators in a row are not "one separator between a letter and a digit"
        ("SPG - 302", ["SPG - 302"]),
        ("SPG--302", ["SPG--302"]),
        ("SPG  302", ["SPG  302"]),
        # any single whitespace character counts, not only the space
        ("SPG\t302", ["SPG\t302", "SPG302", "SPG 302", "SPG-302"]),
        ("SPG\u00a0302", ["SPG\u00a0302", "SPG302", "SPG 302", "SPG-302"]),
        ("SPG_302", ["SPG_302"]),  # an underscore is not a separator
        # ASCII letters only: β, Ä and full-width letters form no boundary
        ("A\u03b242", ["A\u03b242"]),
        ("\u03b1Syn-1", ["\u03b1Syn-1", "\u03b1Syn1", "\u03b1Syn 1"]),
        ("\u00c41", ["\u00c41"]),
        ("\uff33\uff30\uff27302", ["\uff33\uff30\uff27302"]),
        # a digit is any Unicode decimal digit (re's \d), as in candle-fire
        (
            "SPG\u0663\u0660\u0662",
            ["SPG\u0663\u0660\u0662", "SPG \u0663\u0660\u0662", "SPG-\u0663\u0660\u0662"],
        ),
        # no letter-digit boundary: nothing to vary
        ("riluzole", ["riluzole"]),
        ("amyotrophic lateral sclerosis", ["amyotrophic lateral sclerosis"]),
        # the term is used as given: surrounding whitespace is kept, not stripped
        ("  SPG302 \n", ["  SPG302 \n", "  SPG 302 \n", "  SPG-302 \n"]),
    ],
)
def test_term_variants_table(term, expected):
    assert term_variants(term) == expected


@pytest.mark.parametrize("term", ["", "   ", "\t\n", None])
def test_blank_term_is_a_clear_error(term):
    with pytest.raises(ValueError, match="non-empty"):
        term_variants(term)


@pytest.mark.parametrize(
    ("term", "text", "expected"),
    [
        ("SPG302", "mice treated with spg-302 daily", True),
        ("SPG-302", "SPG302 restored synapses", True),
        ("SPG 302", "the SPG-302 arm", True),
        ("TDP-43", "TDP43 aggregates in motor neurons", True),
        ("C9orf72", "a c9orf72 repeat expansion", True),
        ("SOD1", "SOD2 levels were unchanged", False),
        ("SPG302", "SPG30 2 is not a spelling we generate", False),
        ("G93A", "SOD1 G 93A mice", True),
        ("G93A", "the G 93 A allele", False),  # digit -> letter separators are never generated
    ],
)
def test_term_matches_text(term, text, expected):
    assert term_matches_text(term, text) is expected
