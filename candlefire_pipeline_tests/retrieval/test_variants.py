"""Term variants: the spellings every keyword and grounding check tries."""

from __future__ import annotations

import pytest

from candlefire_pipeline.retrieval.variants import term_matches_text, term_variants


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("SPG302", ["SPG302", "SPG 302", "SPG-302"]),
        ("SPG 302", ["SPG 302", "SPG302", "SPG-302"]),
        ("SPG-302", ["SPG-302", "SPG302", "SPG 302"]),
        ("TDP-43", ["TDP-43", "TDP43", "TDP 43"]),
        ("SOD1", ["SOD1", "SOD 1", "SOD-1"]),
        # three boundaries: C|9, 9|orf, orf|72
        ("C9orf72", ["C9orf72", "C 9 orf 72", "C-9-orf-72"]),
        ("AB-12-CD34", ["AB-12-CD34", "AB12CD34", "AB 12 CD 34", "AB-12-CD-34"]),
        # several separators collapse like one
        ("SPG - 302", ["SPG - 302", "SPG302", "SPG 302", "SPG-302"]),
        # no letter-digit boundary: nothing to vary
        ("riluzole", ["riluzole"]),
        ("amyotrophic lateral sclerosis", ["amyotrophic lateral sclerosis"]),
        # a hyphen between letters is not a boundary and stays
        ("anti-TDP43", ["anti-TDP43", "anti-TDP 43", "anti-TDP-43"]),
        ("  SPG302 \n", ["SPG302", "SPG 302", "SPG-302"]),
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
    ],
)
def test_term_matches_text(term, text, expected):
    assert term_matches_text(term, text) is expected
