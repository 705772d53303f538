"""Streaming reader of candle-fire papers.jsonl drop files (optionally gzip-compressed)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

from candlefire_pipeline.corpus.capped import CappedStream, open_capped
from candlefire_pipeline.corpus.records import (
    EXCERPT_CHARS,
    Accepted,
    RecordStream,
    Rejected,
    accept,
    excerpt_of,
    latest_wins,
)
from candlefire_pipeline.settings import IngestLimits

logger = logging.getLogger(__name__)

UTF8_BOM = b"\xef\xbb\xbf"
_DRAIN_BYTES = 1 << 20
_EXCERPT_BYTES = 4 * EXCERPT_CHARS  # enough bytes for EXCERPT_CHARS UTF-8 characters


def _lines(stream: CappedStream, max_bytes: int) -> Iterator[tuple[bytes, bool]]:
    """Yield (line bytes, oversized); an oversized line is cut to its head, the rest skipped."""
    first = True
    while line := stream.readline(max_bytes + 1):
        if first and line.startswith(UTF8_BOM):
            line = line[len(UTF8_BOM) :]
        first = False
        oversized = len(line) > max_bytes and not line.endswith(b"\n")
        if oversized:
            # Bounded memory: never hold more than one record's cap of an oversized line.
            while (rest := stream.readline(_DRAIN_BYTES)) and not rest.endswith(b"\n"):
                pass
        yield line, oversized


def _outcome(record_no: int, line: bytes, oversized: bool, max_bytes: int) -> Accepted | Rejected:
    loose = excerpt_of(line[:_EXCERPT_BYTES].decode("utf-8", "replace"))
    if oversized:
        reason = f"too_large: record exceeds {max_bytes} bytes"
        return Rejected(record_no, None, reason, loose)
    if b"\x00" in line:
        return Rejected(record_no, None, "nul_byte: raw line contains a NUL byte", loose)
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as err:
        return Rejected(record_no, None, f"invalid_utf8: byte {err.start}: {err.reason}", loose)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        return Rejected(record_no, None, f"invalid_json: {err.msg} at column {err.colno}", loose)
    except RecursionError:
        return Rejected(record_no, None, "invalid_json: nested too deeply", loose)
    except ValueError as err:  # e.g. an integer of more than 4,300 digits
        return Rejected(record_no, None, f"invalid_json: {str(err).split(';')[0]}", loose)
    return accept(record_no, raw, text)


def iter_jsonl(path: Path, limits: IngestLimits | None = None) -> Iterator[Accepted | Rejected]:
    """One pass over a papers.jsonl file: one outcome per non-blank line, in file order."""
    path, limits = Path(path), limits or IngestLimits()
    with open_capped(path, limits.max_drop_bytes) as stream:
        record_no = 0
        for line, oversized in _lines(stream, limits.max_record_bytes):
            if not oversized and not line.strip():
                continue  # blank lines are not records
            record_no += 1
            yield _outcome(record_no, line, oversized, limits.max_record_bytes)


def read_jsonl(path: Path, limits: IngestLimits | None = None) -> RecordStream:
    """Read a papers.jsonl file twice so that the last valid record of each pmid wins."""
    stream = latest_wins(lambda: iter_jsonl(path, limits))
    logger.info("read %s: %d records", path, stream.records_in)
    return stream
