"""Writing fetched articles as one drop file: `.part` first, published under a final name."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

_XML_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n<PubmedArticleSet>\n'
_XML_TAIL = b"</PubmedArticleSet>\n"


def stamp(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def publish(part: Path, utcnow: Callable[[], datetime], sleep: Callable) -> Path:
    """Give the finished file its final name, stamped now so names sort in arrival order."""
    for _ in range(3):
        final = part.with_name(f"{stamp(utcnow())}-pubmed.xml")
        try:
            os.link(part, final)  # unlike rename, never overwrites a drop that landed this second
        except FileExistsError:
            sleep(1.0)
            continue
        part.unlink()
        return final
    raise FileExistsError(f"{final} keeps existing; is another fetch writing to {part.parent}?")


def write_drop(
    drops_dir: Path,
    batches: Iterable[list[ET.Element]],
    utcnow: Callable[[], datetime],
    sleep: Callable,
) -> tuple[Path | None, int]:
    """(published drop, articles written); (None, 0) and no file when there was nothing."""
    drops_dir.mkdir(parents=True, exist_ok=True)
    part = drops_dir / f"{stamp(utcnow())}-pubmed.xml.part"
    out = part.open("xb")  # outside the try: a clash must not delete the other writer's file
    try:
        with out:
            out.write(_XML_HEAD)
            written = 0
            for articles in batches:
                for article in articles:
                    article.tail = "\n"
                    out.write(ET.tostring(article, encoding="utf-8", xml_declaration=False))
                written += len(articles)
            out.write(_XML_TAIL)
            out.flush()
            os.fsync(out.fileno())
        if written == 0:
            part.unlink()
            return None, 0
        return publish(part, utcnow, sleep), written
    except BaseException:
        part.unlink(missing_ok=True)
        raise
