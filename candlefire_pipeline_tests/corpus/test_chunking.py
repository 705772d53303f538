"""candle-fire chunking semantics (ARCHITECTURE.md), case by case."""

from __future__ import annotations

import pytest

from candlefire_pipeline.corpus.chunking import CHUNKER_VERSION, chunk_paper, content_hash
from candlefire_pipeline.corpus.schema import CHUNK_SCHEMA


def paper(full_text: str | None = None, **over) -> dict:
    base = {
        "pmid": "31234567",
        "title": "SPG302 restores synapses in TDP-43 ALS models",
        "abstract": "SPG302 was tested in SOD1 and C9orf72 mice.",
        "authors": ["Ann Lee"],
        "year": 2021,
        "doi": "10.1000/spg302",
        "mesh_terms": ["Amyotrophic Lateral Sclerosis", "Synapses"],
        "full_text": full_text,
        "citation_count": 7,
        "entity_names": ["SPG302", "TDP-43"],
        "record_no": 1,
        "paper_hash": "p" * 64,
    }
    return base | over


def sections_of(full_text: str, **over) -> list[tuple[str, str]]:
    return [(c["section"], c["document"]) for c in chunk_paper(paper(full_text, **over))]


@pytest.mark.parametrize(
    "full_text, expected_sections",
    [
        # priority sections first in document order, then the others in document order
        (
            "[Background]\nb\n[Methods]\nm\n[Funding]\nf\n[Results]\nr",
            ["Abstract", "Methods", "Results", "Background", "Funding"],
        ),
        # lower-cased title match
        ("[RESULTS]\nr\n[Conclusion]\nc", ["Abstract", "RESULTS", "Conclusion"]),
        # cap at 6 after ordering: the 7 priority-ish sections push "Zeta" out
        (
            "[Zeta]\nz\n[Introduction]\ni\n[Methods]\nm\n[Results]\nr\n[Discussion]\nd\n"
            "[Conclusion]\nc",
            ["Abstract", "Introduction", "Methods", "Results", "Discussion", "Conclusion"],
        ),
        # empty-body sections are dropped (whitespace-only counts as empty)
        ("[Introduction]\n\n   \n[Results]\nr\n[Empty]\n", ["Abstract", "Results"]),
        # a marker with whitespace around it is still a marker
        ("  [Methods]  \nm", ["Abstract", "Methods"]),
        # "[]", "[ ]", unclosed and nested brackets are ordinary text
        ("[]\n[ ]\n[Intro\n[a]b]\nx", ["Abstract"]),
    ],
)
def test_section_order_cap_and_markers(full_text, expected_sections):
    chunks = chunk_paper(paper(full_text))
    assert [c["section"] for c in chunks] == expected_sections
    assert [c["chunk_id"] for c in chunks] == [f"31234567_s{i}" for i in range(len(chunks))]
    assert [c["chunk_index"] for c in chunks] == list(range(len(chunks)))
    assert all(c["has_full_text"] for c in chunks)


def test_text_before_first_marker_joins_the_abstract_section():
    docs = sections_of("Preamble line one.\nline two\n[Methods]\nWe did things.")
    assert docs[0] == (
        "Abstract",
        "SPG302 restores synapses in TDP-43 ALS models\n[Abstract]\n"
        "SPG302 was tested in SOD1 and C9orf72 mice.\nPreamble line one.\nline two",
    )
    assert docs[1] == (
        "Methods",
        "SPG302 restores synapses in TDP-43 ALS models\n[Methods]\nWe did things.",
    )


@pytest.mark.parametrize(
    "marker_line, is_marker",
    [
        ("[" + "M" * 77 + "]", True),  # 79 characters
        ("[" + "M" * 78 + "]", False),  # 80 characters: ordinary text
        ("[" + "M" * 200 + "]", False),
        ("  [" + "M" * 77 + "]  ", True),  # measured after stripping
    ],
)
def test_marker_lines_of_80_or_more_characters_are_text(marker_line, is_marker):
    chunks = chunk_paper(paper(f"[Results]\nr\n{marker_line}\nbody"))
    if is_marker:
        assert [c["section"] for c in chunks] == ["Abstract", "Results", marker_line.strip()[1:-1]]
    else:
        assert [c["section"] for c in chunks] == ["Abstract", "Results"]
        assert chunks[1]["document"].endswith(f"r\n{marker_line}\nbody")


@pytest.mark.parametrize("full_text", [None, ""])
def test_abstract_only_uses_bare_pmid_and_all_mesh_terms(full_text):
    mesh = [f"Term {i}" for i in range(12)]
    [chunk] = chunk_paper(paper(full_text, mesh_terms=mesh))
    assert chunk["chunk_id"] == "31234567"
    assert chunk["section"] == "abstract" and chunk["chunk_index"] == 0
    assert chunk["document"] == (
        "SPG302 restores synapses in TDP-43 ALS models\n"
        + " ".join(mesh)
        + "\nSPG302 was tested in SOD1 and C9orf72 mice."
    )
    assert chunk["mesh_terms"] == ",".join(mesh[:10])
    assert chunk["has_full_text"] is False


def test_full_text_without_any_section_falls_back_to_abstract_only():
    chunks = chunk_paper(paper("[Methods]\n\n[Results]\n   ", abstract=""))
    assert [(c["chunk_id"], c["section"], c["has_full_text"]) for c in chunks] == [
        ("31234567", "abstract", False)
    ]


def test_metadata_fields_match_the_chunk_schema():
    [chunk] = chunk_paper(paper(None, year=None, entity_names=["SOD1", "C9orf72", "TDP-43"]))
    assert set(chunk) == set(CHUNK_SCHEMA.names)
    assert chunk["entity_names"] == "SOD1,C9orf72,TDP-43"
    assert chunk["year"] is None
    assert (chunk["pmid"], chunk["doi"], chunk["citation_count"]) == (
        "31234567",
        "10.1000/spg302",
        7,
    )
    assert chunk["paper_hash"] == "p" * 64


def test_one_hundred_thousand_markers_chunk_in_linear_time():
    full_text = "\n".join(f"[Part {i}]\nbody {i}" for i in range(100_000)) + "\n[Results]\nlast"
    chunks = chunk_paper(paper(full_text))
    assert [c["section"] for c in chunks] == ["Abstract", "Results", "Part 0", "Part 1"] + [
        "Part 2",
        "Part 3",
    ]
    assert chunks[1]["document"].endswith("[Results]\nlast")


@pytest.mark.parametrize(
    "change",
    [
        {"title": "Other"},
        {"year": 2020},
        {"doi": "10.1/x"},
        {"citation_count": 8},
        {"entity_names": ["SOD1"]},
        {"mesh_terms": ["ALS"]},
        {"abstract": "changed"},
    ],
)
def test_content_hash_changes_with_document_or_metadata(change):
    before = chunk_paper(paper(None))[0]
    after = chunk_paper(paper(None, **change))[0]
    assert after["content_hash"] != before["content_hash"]
    assert after["content_hash"] == content_hash(after)


def test_content_hash_is_stable_and_ignores_paper_only_fields():
    first = chunk_paper(paper("[Methods]\nm"))
    again = chunk_paper(paper("[Methods]\nm", authors=["Someone Else"], paper_hash="q" * 64))
    assert [c["content_hash"] for c in first] == [c["content_hash"] for c in again]
    assert len({c["content_hash"] for c in first}) == len(first)
    assert CHUNKER_VERSION == "cf-1"
