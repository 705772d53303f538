"""Generators of bad drop files: (kind, file name, bytes, expected outcome)."""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field


def rec(pmid: str | int = "100", **over) -> dict:
    base = {
        "pmid": pmid,
        "title": "SPG302 in ALS",
        "abstract": "SPG 302 and SPG-302 restore synapses in TDP-43 mice.",
        "authors": ["Ann Lee"],
        "year": 2023,
        "doi": "",
        "mesh_terms": ["Amyotrophic Lateral Sclerosis"],
        "full_text": None,
        "citation_count": 1,
        "entity_names": ["SPG302"],
    }
    return base | over


def line(record: object) -> bytes:
    return json.dumps(record).encode("utf-8") + b"\n"


def around(bad: bytes) -> bytes:
    """A good record before and after the bad line: nothing else may be lost."""
    return line(rec("1")) + bad + line(rec("3"))


@dataclass
class JsonlCase:
    kind: str
    data: bytes
    accepted: list[str]  # pmids in papers.parquet, in order
    rejects: list[tuple[int, str]] = field(default_factory=list)  # (record_no, reason prefix)
    name: str = "batch.jsonl"


def raw(text: str) -> bytes:
    """A JSONL line written by hand (JSON escapes kept as typed) around a good pmid/title."""
    return text.encode("ascii") + b"\n"


#: Strings that parse (JSON escapes) and that every store can hold: accepted as they are.
WRITABLE_ODDITIES = (
    "\ufffe\uffff\ufdd0\ufdef\U0010fffe\U0010ffff"  # non-characters
    "\u2028\u2029\x85"  # line / paragraph separators, NEL
    "\x01\x1f\x7f\x9f"  # C0 / C1 control characters other than NUL
    "\ufeff\u200b\u200e\u202e"  # BOM mid-text, zero-width space, LRM, RTL override
    "e\u0301\U0001f600\U0001d4d0"  # combining accent, emoji, astral letter
)


def unwritable_cases() -> list[JsonlCase]:
    """Values that parse but that no UTF-8 store can hold, and numbers at the edges."""
    good = ["1", "3"]
    bad = "invalid_unicode"
    return [
        JsonlCase("lone high surrogate in title", around(line(rec("2", title="a\ud800b"))), good,
                  [(2, f"{bad}: title holds a lone surrogate U+D800 at character 1")]),
        JsonlCase("lone low surrogate in abstract", around(line(rec("2", abstract="\udc00"))),
                  good, [(2, f"{bad}: abstract holds a lone surrogate U+DC00")]),
        JsonlCase("reversed surrogate pair in full text",
                  around(line(rec("2", full_text="x\udc00\ud800"))), good,
                  [(2, f"{bad}: full_text holds a lone surrogate U+DC00")]),
        JsonlCase("surrogate in an author", around(line(rec("2", authors=["A", "B\udbff"]))),
                  good, [(2, f"{bad}: authors[1] holds a lone surrogate U+DBFF")]),
        JsonlCase("surrogate in a MeSH term", around(line(rec("2", mesh_terms=["\ud800"]))),
                  good, [(2, f"{bad}: mesh_terms[0]")]),
        JsonlCase("surrogate in an entity name",
                  around(line(rec("2", entity_names=["SOD1", "x\udfff"]))), good,
                  [(2, f"{bad}: entity_names[1]")]),
        JsonlCase("surrogate in doi", around(line(rec("2", doi="10.1/\ud800"))), good,
                  [(2, f"{bad}: doi")]),
        JsonlCase("surrogate in pmid", around(line(rec("2\ud800"))), good, [(2, "bad_pmid")]),
        JsonlCase("surrogate as year", around(line(rec("2", year="\ud800"))), good,
                  [(2, "wrong_type")]),
        JsonlCase("surrogate in an unknown key", around(line(rec("2") | {"\ud800": "\udc00"})),
                  ["1", "2", "3"]),
        JsonlCase("valid surrogate pair (emoji)", around(raw(
            '{"pmid": "2", "title": "SOD1 \\ud83d\\ude00", "abstract": "a"}')), ["1", "2", "3"]),
        JsonlCase("non-characters and control characters",
                  around(line(rec("2", title=WRITABLE_ODDITIES, authors=[WRITABLE_ODDITIES]))),
                  ["1", "2", "3"]),
        JsonlCase("integer of 5,000 digits", around(raw(
            '{"pmid": "2", "title": "t", "year": ' + "9" * 5000 + "}")), good,
            [(2, "invalid_json: Exceeds the limit (4300 digits)")]),
        JsonlCase("integer of 400 digits", around(line(rec("2", citation_count=10**400))), good,
                  [(2, "out_of_range: citation_count 1000000000")]),
        JsonlCase("float 1e400 (infinity)", around(raw(
            '{"pmid": "2", "title": "t", "citation_count": 1e400}')), good, [(2, "wrong_type")]),
        JsonlCase("float -1e400 as year",
                  around(raw('{"pmid": "2", "title": "t", "year": -1e400}')), good,
                  [(2, "wrong_type")]),
        JsonlCase("float of 5,000 digits", around(raw(
            '{"pmid": "2", "title": "t", "year": ' + "1" * 5000 + ".5}")), good,
            [(2, "wrong_type")]),
        JsonlCase("Infinity literal", around(raw('{"pmid": "2", "title": "t", "year": Infinity}')),
                  good, [(2, "wrong_type")]),
    ]  # fmt: skip


def _markers(n: int) -> str:
    return "\n".join(f"[Part {i}]\ntext {i}" for i in range(n))


def jsonl_cases() -> list[JsonlCase]:
    good = ["1", "3"]
    return [
        JsonlCase(
            "truncated JSON", around(line(rec("2"))[:40] + b"\n"), good, [(2, "invalid_json")]
        ),
        JsonlCase(
            "truncated last line",
            line(rec("1")) + line(rec("2"))[:30],
            ["1"],
            [(2, "invalid_json")],
        ),
        JsonlCase("JSON array line", around(b'[{"pmid": "2"}]\n'), good, [(2, "not_an_object")]),
        JsonlCase("JSON scalar line", around(b'"just a string"\n'), good, [(2, "not_an_object")]),
        JsonlCase(
            "deeply nested JSON",
            around(b"[" * 100_000 + b"]" * 100_000 + b"\n"),
            good,
            [(2, "invalid_json")],
        ),
        JsonlCase("year '2020a'", around(line(rec("2", year="2020a"))), good, [(2, "wrong_type")]),
        JsonlCase(
            "year out of range", around(line(rec("2", year=3020))), good, [(2, "out_of_range")]
        ),
        JsonlCase(
            "authors a string", around(line(rec("2", authors="Ann Lee"))), good, [(2, "wrong_type")]
        ),
        JsonlCase(
            "mesh_terms not a list",
            around(line(rec("2", mesh_terms="ALS"))),
            good,
            [(2, "wrong_type")],
        ),
        JsonlCase(
            "citation_count negative",
            around(line(rec("2", citation_count=-3))),
            good,
            [(2, "out_of_range")],
        ),
        JsonlCase(
            "citation_count non-int",
            around(line(rec("2", citation_count=1.5))),
            good,
            [(2, "wrong_type")],
        ),
        JsonlCase(
            "citation_count NaN",
            around(b'{"pmid": "2", "title": "t", "citation_count": NaN}\n'),
            good,
            [(2, "wrong_type")],
        ),
        JsonlCase(
            "full_text non-string",
            around(line(rec("2", full_text={"a": 1}))),
            good,
            [(2, "wrong_type")],
        ),
        JsonlCase(
            "NUL byte in line",
            around(line(rec("2")).replace(b"SPG302 in", b"SPG\x00302")),
            good,
            [(2, "nul_byte")],
        ),
        JsonlCase(
            "NUL escape in string", around(line(rec("2", title="a\x00b"))), good, [(2, "nul_byte")]
        ),
        JsonlCase(
            "invalid UTF-8",
            around(line(rec("2")).replace(b"SPG302 in", b"SPG\xff\xfe in")),
            good,
            [(2, "invalid_utf8")],
        ),
        JsonlCase("UTF-8 BOM at start", b"\xef\xbb\xbf" + line(rec("1")) + line(rec("3")), good),
        JsonlCase(
            "CRLF line ends", line(rec("1"))[:-1] + b"\r\n" + line(rec("3"))[:-1] + b"\r\n", good
        ),
        JsonlCase("empty pmid", around(line(rec(""))), good, [(2, "missing_pmid")]),
        JsonlCase("whitespace pmid", around(line(rec(" \t "))), good, [(2, "missing_pmid")]),
        JsonlCase("path-like pmid", around(line(rec("../2"))), good, [(2, "bad_pmid")]),
        JsonlCase("numeric pmid", around(line(rec(2))), ["1", "2", "3"]),
        JsonlCase(
            "no title, no abstract",
            around(line(rec("2", title="", abstract=None))),
            good,
            [(2, "no_text")],
        ),
        JsonlCase(
            "10 MB document",
            around(line(rec("2", full_text="x" * 10_000_000))),
            good,
            [(2, "too_large")],
        ),
        JsonlCase(
            "100,000 markers", around(line(rec("2", full_text=_markers(100_000)))), ["1", "2", "3"]
        ),
        JsonlCase(
            "unclosed markers",
            around(line(rec("2", full_text="[Intro\ntext\n[Methods"))),
            ["1", "2", "3"],
        ),
        JsonlCase(
            "duplicate pmid",
            line(rec("1")) + line(rec("2")) + line(rec("1", title="v2")),
            ["2", "1"],
            [(1, "duplicate_pmid: superseded by record 3")],
        ),
        JsonlCase(
            "duplicate after invalid",
            line(rec("1")) + line(rec("1", year="x")),
            ["1"],
            [(2, "wrong_type")],
        ),
        JsonlCase(
            "unknown extra fields",
            around(line(rec("2") | {"journal": {"x": [1]}})),
            ["1", "2", "3"],
        ),
        JsonlCase("blank lines", b"\n\n" + line(rec("1")) + b"   \n\r\n" + line(rec("3")), good),
        JsonlCase("empty file", b"", []),
        JsonlCase(
            "gzip JSONL",
            gzip.compress(around(b"not json\n")),
            good,
            [(2, "invalid_json")],
            name="batch.jsonl.gz",
        ),
    ]


def article(pmid: str, extra: str = "") -> str:
    return (
        f"<PubmedArticle><MedlineCitation><PMID Version='1'>{pmid}</PMID><Article>"
        "<Journal><JournalIssue><PubDate><MedlineDate>1998 Dec-1999 Jan</MedlineDate></PubDate>"
        "</JournalIssue></Journal><ArticleTitle>SOD1 in <i>ALS</i></ArticleTitle><Abstract>"
        "<AbstractText Label='BACKGROUND'>b</AbstractText><AbstractText>plain</AbstractText>"
        f"</Abstract></Article></MedlineCitation>{extra}</PubmedArticle>"
    )


def article_year(pmid: str, year: str) -> str:
    """article() with a PubDate/Year instead of a MedlineDate."""
    return article(pmid).replace(
        "<MedlineDate>1998 Dec-1999 Jan</MedlineDate>", f"<Year>{year}</Year>"
    )


def xml_set(*parts: str, doctype: str = "") -> bytes:
    body = "".join(parts)
    return f"<?xml version='1.0'?>{doctype}<PubmedArticleSet>{body}</PubmedArticleSet>".encode()


LAUGHS = (
    "<!DOCTYPE PubmedArticleSet [<!ENTITY lol 'lol'><!ENTITY lol1 '&lol;&lol;'>"
    + "".join(f"<!ENTITY lol{i} '{('&lol' + str(i - 1) + ';') * 10}'>" for i in range(2, 10))
    + "]>"
)

#: (kind, file name, data, message fragment) of drop files that are unreadable as a whole.
UNREADABLE = [
    ("truncated gzip XML", "b.xml.gz", gzip.compress(xml_set(article("1")))[:-20], "unreadable"),
    ("truncated gzip JSONL", "b.jsonl.gz", gzip.compress(line(rec("1")) * 50)[:-9], "unreadable"),
    ("not gzip at all", "b.xml.gz", b"plain bytes", "unreadable"),
    ("XML billion laughs", "b.xml", xml_set(article("&lol9;"), doctype=LAUGHS), "unsafe XML"),
    (
        "XML external entity",
        "b.xml",
        xml_set(article("&x;"), doctype="<!DOCTYPE a [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>"),
        "unsafe XML",
    ),
    (
        "XML parameter entity",
        "b.xml",
        xml_set(article("1"), doctype="<!DOCTYPE a [<!ENTITY % p SYSTEM 'http://x/y'> %p;]>"),
        "unsafe XML",
    ),
    ("wrong root element", "b.xml", b"<html><PubmedArticle/></html>", "root element <html>"),
    ("truncated XML", "b.xml", xml_set(article("1"), article("2"))[:-40], "unparsable XML"),
    ("empty XML file", "b.xml", b"", "unparsable XML"),
    ("XML NUL char ref", "b.xml", xml_set(article("1&#0;")), "unparsable XML"),
    ("JSON in an .xml file", "b.xml", line(rec("1")), "unparsable XML"),
    ("unsupported suffix", "b.csv", b"pmid,title\n1,x\n", "unsupported file type"),
]

#: (kind, data, accepted pmids, (record_no, reason prefix) rejects, deleted pmids)
XML_RECORD_CASES = [
    (
        "XML citation without PMID",
        xml_set(article("1"), article("")),
        ["1"],
        [(2, "missing_pmid")],
        [],
    ),
    (
        "XML book article",
        xml_set(article("1"), "<PubmedBookArticle/>"),
        ["1"],
        [(2, "unsupported_record")],
        [],
    ),
    (
        "XML duplicate PMID",
        xml_set(article("1"), article("2"), article("1")),
        ["2", "1"],
        [(1, "duplicate_pmid: superseded by record 3")],
        [],
    ),
    (
        "XML delete after citation",
        xml_set(
            article("1"),
            article("2"),
            "<DeleteCitation><PMID>2</PMID><PMID>bad id!</PMID></DeleteCitation>",
        ),
        ["1"],
        [(2, "deleted_in_batch")],
        ["2"],
    ),
    (
        "XML superscript digits as year",  # str.isdigit() is True, int() refuses them
        xml_set(article("1"), article_year("2", "\u00b9\u2079\u2079\u2078")),
        ["1"],
        [(2, "wrong_type")],
        [],
    ),
    (
        "XML year of 5,000 digits",  # more than int() converts
        xml_set(article("1"), article_year("2", "9" * 5000)),
        ["1"],
        [(2, "wrong_type")],
        [],
    ),
    (
        "XML year of 30 digits",
        xml_set(article("1"), article_year("2", "9" * 30)),
        ["1"],
        [(2, "out_of_range")],
        [],
    ),
    (
        "XML external DTD reference",
        xml_set(
            article("1"),
            doctype=(
                "<!DOCTYPE PubmedArticleSet PUBLIC '-//NLM//DTD x//EN' 'http://127.0.0.1:9/x.dtd'>"
            ),
        ),
        ["1"],
        [],
        [],
    ),
]
