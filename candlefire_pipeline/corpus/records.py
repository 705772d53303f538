"""Validation of one raw record into a normalized paper, and the per-record outcome types."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

EXCERPT_CHARS = 200
YEAR_MIN, YEAR_MAX = 1800, 2100
INT32_MAX = 2**31 - 1
# Letters and digits only: the pmid is embedded in chunk ids (`{pmid}_s{i}`), file names and SQL
# filters, so "_" (the chunk-id separator), spaces and punctuation are kept out.
PMID_PATTERN = re.compile(r"[A-Za-z0-9]{1,32}")
# JSON's \ud800-style escapes parse into lone surrogates, which no UTF-8 writer (Arrow, Postgres,
# Chroma) can encode.
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Fields of PAPER_SCHEMA that describe the paper's content (what paper_hash covers).
CONTENT_FIELDS = (
    "pmid",
    "title",
    "abstract",
    "authors",
    "year",
    "doi",
    "mesh_terms",
    "full_text",
    "citation_count",
    "entity_names",
)


class DropFileError(Exception):
    """A drop file that cannot be read as a whole (its message names the file and the problem)."""


class RecordError(ValueError):
    """One record fails validation; `kind` is a short stable label, `detail` says what is wrong."""

    def __init__(self, kind: str, detail: str):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


@dataclass(frozen=True)
class Accepted:
    record_no: int
    paper: dict[str, Any]
    excerpt: str = ""  # kept so a later duplicate can still show the raw record


@dataclass(frozen=True)
class Rejected:
    record_no: int
    pmid: str | None
    reason: str  # "<kind>: <detail>"
    excerpt: str

    @property
    def kind(self) -> str:
        return self.reason.split(":", 1)[0]


@dataclass(frozen=True)
class Deleted:
    pmid: str


Outcome = Accepted | Rejected | Deleted


def writable_text(text: str) -> str:
    """text with NUL and lone surrogates replaced by U+FFFD: safe in any UTF-8 store or file."""
    return _SURROGATE.sub("\ufffd", text).replace("\x00", "\ufffd")


def excerpt_of(raw: str) -> str:
    """At most EXCERPT_CHARS characters of a raw record, for a reject row (NUL made visible)."""
    return writable_text(raw[:EXCERPT_CHARS])


def pmid_hint(raw: object) -> str | None:
    """Best-effort pmid of a raw record for a reject row (None when it cannot be read)."""
    if not isinstance(raw, dict):
        return None
    value = raw.get("pmid")
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = writable_text(str(value).strip())
    return text[:64] if text else None


def _optional_str(raw: dict, field: str) -> str | None:
    value = raw.get(field)
    if value is None or isinstance(value, str):
        return value
    raise RecordError("wrong_type", f"{field} must be a string, got {type(value).__name__}")


def _str_list(raw: dict, field: str) -> list[str]:
    value = raw.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError("wrong_type", f"{field} must be a list, got {type(value).__name__}")
    for item in value:
        if not isinstance(item, str):
            raise RecordError(
                "wrong_type", f"{field} items must be strings, got {type(item).__name__}"
            )
    return value


def _int_field(raw: dict, field: str) -> int | None:
    value = raw.get(field)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError("wrong_type", f"{field} must be an integer, got {value!r:.40}")
    return value


def _pmid(raw: dict) -> str:
    value = raw.get("pmid")
    if value is None:
        raise RecordError("missing_pmid", "pmid is missing or null")
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise RecordError("wrong_type", f"pmid must be a string, got {type(value).__name__}")
    pmid = str(value).strip()
    if not pmid:
        raise RecordError("missing_pmid", "pmid is empty or whitespace")
    if not PMID_PATTERN.fullmatch(pmid):
        raise RecordError("bad_pmid", f"pmid {pmid[:40]!r} is not 1-32 letters/digits")
    return pmid


def _year(raw: dict) -> int | None:
    year = _int_field(raw, "year")
    # 0 is the source corpora's "unknown" (all of SciFact, 58 PubMedQA records): keep it as null.
    if year is None or year == 0:
        return None
    if not YEAR_MIN <= year <= YEAR_MAX:
        raise RecordError("out_of_range", f"year {year!r:.40} outside {YEAR_MIN}..{YEAR_MAX}")
    return year


def _citation_count(raw: dict) -> int:
    count = _int_field(raw, "citation_count")
    if count is None:
        return 0
    if not 0 <= count <= INT32_MAX:
        raise RecordError("out_of_range", f"citation_count {count!r:.40} outside 0..{INT32_MAX}")
    return count


def _full_text(raw: dict) -> str | None:
    text = _optional_str(raw, "full_text")
    # "" means no full text (candle-fire tests truthiness); null is the stored form of that.
    return text if text else None


def _check_writable(field: str, text: str) -> None:
    """RecordError for a string that parses but that no store can hold."""
    if "\x00" in text:
        raise RecordError("nul_byte", f"{field} contains a NUL character")
    if found := _SURROGATE.search(text):
        raise RecordError(
            "invalid_unicode",
            f"{field} holds a lone surrogate U+{ord(found.group()):04X} at character "
            f"{found.start()} (not encodable as UTF-8)",
        )


def _reject_unwritable(paper: dict[str, Any]) -> None:
    for field in CONTENT_FIELDS:
        value = paper[field]
        if isinstance(value, str):
            _check_writable(field, value)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                _check_writable(f"{field}[{index}]", item)


def validate_record(raw: object) -> dict[str, Any]:
    """Normalize one raw record to the PAPER_SCHEMA content fields or raise RecordError."""
    if not isinstance(raw, dict):
        raise RecordError("not_an_object", f"record is a JSON {type(raw).__name__}, not an object")
    paper: dict[str, Any] = {
        "pmid": _pmid(raw),
        "title": (_optional_str(raw, "title") or "").strip(),
        "abstract": (_optional_str(raw, "abstract") or "").strip(),
        "authors": _str_list(raw, "authors"),
        "year": _year(raw),
        "doi": (_optional_str(raw, "doi") or "").strip(),
        "mesh_terms": _str_list(raw, "mesh_terms"),
        "full_text": _full_text(raw),
        "citation_count": _citation_count(raw),
        "entity_names": _str_list(raw, "entity_names"),
    }
    if not paper["title"] and not paper["abstract"]:
        raise RecordError("no_text", "both title and abstract are missing or empty")
    _reject_unwritable(paper)
    return paper


def paper_hash(paper: dict[str, Any]) -> str:
    """sha256 hex of the canonical JSON of a paper's content fields (record_no excluded)."""
    content = {field: paper.get(field) for field in CONTENT_FIELDS}
    canonical = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def accept(record_no: int, raw: object, excerpt: str) -> Accepted | Rejected:
    """Validate a raw record into an Accepted (with record_no and paper_hash) or a Rejected."""
    try:
        paper = validate_record(raw)
    except RecordError as err:
        return Rejected(record_no, pmid_hint(raw), str(err), excerpt_of(excerpt))
    paper["record_no"] = record_no
    paper["paper_hash"] = paper_hash(paper)
    return Accepted(record_no, paper, excerpt_of(excerpt))


@dataclass
class RecordStream:
    """A drop file read twice: records_in from the first pass, outcomes from the second."""

    records_in: int
    outcomes: Iterator[Outcome]


def latest_wins(scan: Callable[[], Iterable[Outcome]]) -> RecordStream:
    """Apply "the last valid record or delete of a pmid wins" over a repeatable scan."""
    last: dict[str, tuple[int, int | None]] = {}  # pmid -> (position, record_no or None=delete)
    records_in = 0
    for position, outcome in enumerate(scan()):
        if isinstance(outcome, Accepted):
            last[outcome.paper["pmid"]] = (position, outcome.record_no)
        elif isinstance(outcome, Deleted):
            last[outcome.pmid] = (position, None)
        if not isinstance(outcome, Deleted):
            records_in += 1
    return RecordStream(records_in, _superseded_rejected(scan, last))


def _superseded_rejected(
    scan: Callable[[], Iterable[Outcome]], last: dict[str, tuple[int, int | None]]
) -> Iterator[Outcome]:
    for position, outcome in enumerate(scan()):
        if not isinstance(outcome, Accepted):
            yield outcome
            continue
        pmid = outcome.paper["pmid"]
        winner_position, winner_record = last[pmid]
        if winner_position == position:
            yield outcome
            continue
        if winner_record is None:
            reason = "deleted_in_batch: removed by a later DeleteCitation in the same file"
        else:
            reason = f"duplicate_pmid: superseded by record {winner_record}"
        yield Rejected(outcome.record_no, pmid, reason, outcome.excerpt)
