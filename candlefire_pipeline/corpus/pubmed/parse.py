"""Parsing E-utilities answers: the esearch history handle and efetch's PubmedArticle elements."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import NamedTuple

import defusedxml.ElementTree as SafeET
from defusedxml import DefusedXmlException

from candlefire_pipeline.corpus.pubmed.client import PubmedFetchError, TransientBodyError

ARTICLE_TAGS = frozenset({"PubmedArticle", "PubmedBookArticle"})


class Search(NamedTuple):
    """What esearch found: how many records, and where they wait on the history server."""

    count: int
    webenv: str
    query_key: str


def parse_esearch(body: bytes) -> Search:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise TransientBodyError(f"esearch answer is not JSON: {exc}") from None
    result = doc.get("esearchresult") if isinstance(doc, dict) else None
    if not isinstance(result, dict):
        raise PubmedFetchError(f"esearch answer has no esearchresult: {str(doc)[:200]}")
    if "ERROR" in result:
        raise PubmedFetchError(f"esearch rejected the query: {result['ERROR']}")
    try:
        count = int(result.get("count", 0))
    except (TypeError, ValueError):
        raise PubmedFetchError(f"esearch count is not a number: {result.get('count')!r}") from None
    webenv, query_key = result.get("webenv", ""), result.get("querykey", "")
    if count and not (webenv and query_key):
        raise PubmedFetchError("esearch returned no history handle (webenv/querykey)")
    return Search(count, webenv, str(query_key))


def parse_efetch(body: bytes) -> list[ET.Element]:
    try:
        root = SafeET.fromstring(body)
    except ET.ParseError as exc:
        raise TransientBodyError(f"efetch answer is not well-formed XML: {exc}") from None
    except DefusedXmlException as exc:
        raise PubmedFetchError(f"efetch answer uses forbidden XML constructs: {exc!r}") from None
    if root.tag != "PubmedArticleSet":
        detail = root.findtext("ERROR") or root.tag
        raise PubmedFetchError(f"efetch returned no PubmedArticleSet: {detail}")
    return [child for child in root if child.tag in ARTICLE_TAGS]
