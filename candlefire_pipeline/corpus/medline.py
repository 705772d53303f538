"""Streaming reader of PubMed/MEDLINE XML drop files (.xml, .xml.gz) with defusedxml, in limits."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from xml.etree.ElementTree import Element, ParseError, tostring

from defusedxml import DefusedXmlException

from candlefire_pipeline.corpus.capped import CappedStream, open_capped
from candlefire_pipeline.corpus.records import (
    PMID_PATTERN,
    Accepted,
    Deleted,
    DropFileError,
    Outcome,
    RecordStream,
    Rejected,
    accept,
    excerpt_of,
    latest_wins,
    pmid_hint,
)
from candlefire_pipeline.corpus.xml_stream import Oversized, iter_records
from candlefire_pipeline.settings import IngestLimits

logger = logging.getLogger(__name__)

ROOT_ELEMENTS = ("PubmedArticleSet", "MedlineCitationSet")
#: Where a record's PMID sits (PubmedArticle, or a bare MedlineCitation).
PMID_PATHS = (("MedlineCitation", "PMID"), ("PMID",))
_FIRST_YEAR = re.compile(r"(?<!\d)(\d{4})(?!\d)")


def _text(elem: Element | None) -> str:
    """All text inside an element (inline markup such as <i> kept as its text), stripped."""
    return "".join(elem.itertext()).strip() if elem is not None else ""


def _abstract(article: Element) -> str:
    parts = []
    for part in article.iterfind("Abstract/AbstractText"):
        text = _text(part)
        label = (part.get("Label") or "").strip()
        if text:
            parts.append(f"{label}: {text}" if label else text)
    return "\n".join(parts)


def _author(author: Element) -> str:
    collective = _text(author.find("CollectiveName"))
    if collective:
        return collective
    first = _text(author.find("ForeName")) or _text(author.find("Initials"))
    return " ".join(p for p in (first, _text(author.find("LastName"))) if p)


def _year(article: Element) -> int | str | None:
    """PubDate/Year, else the first 4-digit year of MedlineDate; odd text goes on to validation."""
    pub_date = article.find("Journal/JournalIssue/PubDate")
    if pub_date is None:
        return None
    year = _text(pub_date.find("Year"))
    if year.isdecimal():
        try:
            return int(year)
        except ValueError:  # more digits than int() converts: validation rejects the text
            return year
    if year:
        return year
    match = _FIRST_YEAR.search(_text(pub_date.find("MedlineDate")))
    return int(match.group(1)) if match else None


def _doi(record: Element, article: Element) -> str:
    doi = _text(article.find("ELocationID[@EIdType='doi']"))
    # PubmedData's own ArticleIdList only: ReferenceList entries carry the cited papers' DOIs.
    return doi or _text(record.find("PubmedData/ArticleIdList/ArticleId[@IdType='doi']"))


def _raw_paper(record: Element, citation: Element) -> dict:
    article = citation.find("Article")
    if article is None:
        article = Element("Article")
    return {
        "pmid": _text(citation.find("PMID")) or None,
        "title": _text(article.find("ArticleTitle")),
        "abstract": _abstract(article),
        "authors": [name for a in article.iterfind("AuthorList/Author") if (name := _author(a))],
        "year": _year(article),
        "doi": _doi(record, article),
        "mesh_terms": [
            _text(d) for d in citation.iterfind("MeshHeadingList/MeshHeading/DescriptorName")
        ],
        "full_text": None,
        "citation_count": 0,
        "entity_names": [],
    }


def _excerpt(record: Element, citation: Element | None) -> str:
    """The record's opening tag, PMID and title as XML: serializing whole records costs 40%."""
    if citation is None:
        return excerpt_of(tostring(record, encoding="unicode"))
    parts = [f"<{record.tag}>"]
    for elem in (citation.find("PMID"), citation.find("Article/ArticleTitle")):
        if elem is not None:
            parts.append(tostring(elem, encoding="unicode").strip())
    return excerpt_of("".join(parts))


def _record_outcome(record_no: int, record: Element) -> Accepted | Rejected:
    citation = record if record.tag == "MedlineCitation" else record.find("MedlineCitation")
    excerpt = _excerpt(record, citation)
    if record.tag not in ("PubmedArticle", "MedlineCitation") or citation is None:
        reason = f"unsupported_record: <{record.tag}> holds no MedlineCitation"
        return Rejected(record_no, None, reason, excerpt)
    return accept(record_no, _raw_paper(record, citation), excerpt)


def _oversized_outcome(record_no: int, skipped: Oversized, path: Path) -> Rejected:
    if skipped.tag == "DeleteCitation":
        # deletes are not records that can be rejected: losing some silently would keep papers
        raise DropFileError(f"{path}: a <DeleteCitation> is too large ({skipped.reason})")
    pmid = pmid_hint({"pmid": skipped.record_id})
    excerpt = f"<{skipped.tag}><PMID>{pmid or ''}</PMID>"
    return Rejected(record_no, pmid, skipped.reason, excerpt_of(excerpt))


def _deleted(delete: Element, path: Path) -> Iterator[Deleted]:
    for elem in delete.iter("PMID"):
        pmid = _text(elem)
        if PMID_PATTERN.fullmatch(pmid):
            yield Deleted(pmid)
        else:
            # No accepted paper can carry such a pmid, so skipping it removes nothing.
            logger.warning("%s: ignoring DeleteCitation PMID %r (not a valid pmid)", path, pmid)


def _scan(stream: CappedStream, path: Path, limits: IngestLimits) -> Iterator[Outcome]:
    record_no = 0
    for record in iter_records(stream, path, limits, ROOT_ELEMENTS, PMID_PATHS):
        if isinstance(record, Element) and record.tag == "DeleteCitation":
            yield from _deleted(record, path)
            continue
        record_no += 1
        if isinstance(record, Oversized):
            yield _oversized_outcome(record_no, record, path)
        else:
            yield _record_outcome(record_no, record)


def iter_medline(path: Path, limits: IngestLimits | None = None) -> Iterator[Outcome]:
    """One pass over a MEDLINE XML file: an outcome per citation and a Deleted per delete PMID."""
    path, limits = Path(path), limits or IngestLimits()
    try:
        with open_capped(path, limits.max_drop_bytes) as stream:
            yield from _scan(stream, path, limits)
    except DefusedXmlException as err:
        raise DropFileError(f"{path}: unsafe XML refused ({type(err).__name__}: {err})") from err
    except ParseError as err:
        raise DropFileError(f"{path}: unparsable XML: {err}") from err


def read_medline(path: Path, limits: IngestLimits | None = None) -> RecordStream:
    """Read a MEDLINE file twice so that the last valid citation or delete of a pmid wins."""
    stream = latest_wins(lambda: iter_medline(path, limits))
    logger.info("read %s: %d citations", path, stream.records_in)
    return stream
