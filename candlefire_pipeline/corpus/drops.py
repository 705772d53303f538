"""Drop file -> per-batch papers/rejects/deleted parquet, and papers -> chunks parquet."""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from candlefire_pipeline.corpus.chunking import CHUNKER_VERSION, chunker
from candlefire_pipeline.corpus.jsonl import read_jsonl
from candlefire_pipeline.corpus.medline import read_medline
from candlefire_pipeline.corpus.records import (
    Accepted,
    Deleted,
    DropFileError,
    RecordStream,
    Rejected,
    writable_text,
)
from candlefire_pipeline.corpus.schema import (
    CHUNK_SCHEMA,
    DELETED_SCHEMA,
    PAPER_SCHEMA,
    REJECT_SCHEMA,
)
from candlefire_pipeline.settings import IngestLimits

__all__ = [
    "SUPPORTED_SUFFIXES",
    "ChunksSummary",
    "DropFileError",
    "PapersSummary",
    "is_supported_drop",
    "read_drop",
    "validate_batch_key",
    "write_chunks",
    "write_papers",
]

logger = logging.getLogger(__name__)

SUPPORTED_SUFFIXES = (".jsonl", ".jsonl.gz", ".xml", ".xml.gz")
MAX_BATCH_KEY_CHARS = 200
WRITE_BATCH_ROWS = 1000
#: Buffered text that forces a flush before WRITE_BATCH_ROWS: rows may hold megabytes each.
WRITE_BATCH_BYTES = 32 * 1024 * 1024
# Papers may carry up to max_record_bytes of full text each: read few at a time.
READ_BATCH_PAPERS = 64


def validate_batch_key(key: str) -> str:
    """Return key if it is a plain file name usable as a batch directory, else raise ValueError."""
    if not isinstance(key, str) or not 1 <= len(key) <= MAX_BATCH_KEY_CHARS:
        raise ValueError(f"batch key must be a string of 1..{MAX_BATCH_KEY_CHARS} characters")
    if "/" in key or "\\" in key:
        raise ValueError(f"batch key {key!r} must be a file name, not a path")
    if ".." in key:
        raise ValueError(f"batch key {key!r} must not contain '..'")
    if key.startswith("."):
        raise ValueError(f"batch key {key!r} must not start with a dot")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in key):
        raise ValueError(f"batch key {key!r} must not contain control characters")
    return key


def is_supported_drop(name: str) -> bool:
    """Whether a file name has one of SUPPORTED_SUFFIXES."""
    return name.endswith(SUPPORTED_SUFFIXES)


def read_drop(drop_path: Path, limits: IngestLimits | None = None) -> RecordStream:
    """Open a drop file with the reader its suffix names, within `limits` (defaults if None)."""
    drop_path = Path(drop_path)
    if not is_supported_drop(drop_path.name):
        raise DropFileError(
            f"{drop_path}: unsupported file type (expected one of {', '.join(SUPPORTED_SUFFIXES)})"
        )
    if not drop_path.is_file():
        raise DropFileError(f"{drop_path}: not a readable file")
    if drop_path.name.endswith((".xml", ".xml.gz")):
        return read_medline(drop_path, limits)
    return read_jsonl(drop_path, limits)


class _AtomicParquet:
    """Buffered ParquetWriter on `<name>.tmp`; commit() renames it into place, discard() removes."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.tmp, self.schema = path, path.with_name(path.name + ".tmp"), schema
        self.writer = pq.ParquetWriter(self.tmp, schema)
        self.rows: list[dict[str, Any]] = []
        self.count = 0
        self.buffered_chars = 0

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)
        self.count += 1
        self.buffered_chars += _text_size(row)
        if len(self.rows) >= WRITE_BATCH_ROWS or self.buffered_chars >= WRITE_BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.rows, self.buffered_chars = [], 0

    def close(self) -> int:
        """Flush and close; return the row count the parquet footer records."""
        self._flush()
        self.writer.close()
        return pq.ParquetFile(self.tmp).metadata.num_rows

    def commit(self) -> None:
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        try:
            self.writer.close()
        finally:
            self.tmp.unlink(missing_ok=True)


def _text_size(row: dict[str, Any]) -> int:
    """Characters of text in a row (strings and string lists), to bound what is buffered."""
    size = 0
    for value in row.values():
        if isinstance(value, str):
            size += len(value)
        elif isinstance(value, list):
            size += sum(len(item) for item in value if isinstance(item, str))
    return size


def _md_cell(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return text.replace("|", "\\|").replace("`", "'")


@dataclass
class PapersSummary:
    records_in: int = 0
    accepted: int = 0
    rejected: int = 0
    deleted: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # reject kind -> count
    samples: dict[str, str] = field(default_factory=dict)  # reject kind -> first example

    def count_reject(self, reject: Rejected) -> None:
        self.reasons[reject.kind] = self.reasons.get(reject.kind, 0) + 1
        self.samples.setdefault(reject.kind, f"record {reject.record_no}: {reject.reason}")

    def reasons_markdown(self, limit: int = 10) -> str:
        """Markdown table of reject kinds (most frequent first) with a count and a sample."""
        if not self.reasons:
            return "No rejected records."
        ranked = sorted(self.reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        lines = ["| reason | count | sample |", "|---|---:|---|"]
        lines += [
            f"| {_md_cell(kind)} | {n} | {_md_cell(self.samples.get(kind, ''))} |"
            for kind, n in ranked[:limit]
        ]
        if len(ranked) > limit:
            others = sum(n for _, n in ranked[limit:])
            lines.append(f"| ({len(ranked) - limit} more kinds) | {others} | |")
        return "\n".join(lines)


def _route(
    stream: RecordStream, writers: dict[str, _AtomicParquet], summary: PapersSummary
) -> None:
    for outcome in stream.outcomes:
        if isinstance(outcome, Accepted):
            writers["papers"].add(outcome.paper)
            summary.accepted += 1
        elif isinstance(outcome, Rejected):
            # a reject row must always be writable, whatever its record held
            writers["rejects"].add(
                {
                    "record_no": outcome.record_no,
                    "pmid": None if outcome.pmid is None else writable_text(outcome.pmid),
                    "reason": writable_text(outcome.reason),
                    "excerpt": writable_text(outcome.excerpt),
                }
            )
            summary.rejected += 1
            summary.count_reject(outcome)
        elif isinstance(outcome, Deleted):
            writers["deleted"].add({"pmid": outcome.pmid})
            summary.deleted += 1


def _check_counts(summary: PapersSummary, written: dict[str, int], drop_path: Path) -> None:
    # Every record read is written exactly once, as a paper or as a reject: nothing vanishes.
    if summary.accepted + summary.rejected != summary.records_in or written != {
        "papers": summary.accepted,
        "rejects": summary.rejected,
        "deleted": summary.deleted,
    }:
        raise AssertionError(f"{drop_path}: record accounting broken: {summary} vs {written}")


def write_papers(
    drop_path: Path, out_dir: Path, limits: IngestLimits | None = None
) -> PapersSummary:
    """Parse one drop file into out_dir/{papers,rejects,deleted}.parquet, atomically."""
    drop_path, out_dir = Path(drop_path), Path(out_dir)
    stream = read_drop(drop_path, limits)
    out_dir.mkdir(parents=True, exist_ok=True)
    # papers last: its presence marks a complete batch (the ledger relies on it).
    schemas = {"rejects": REJECT_SCHEMA, "deleted": DELETED_SCHEMA, "papers": PAPER_SCHEMA}
    writers: dict[str, _AtomicParquet] = {}
    try:
        for name, schema in schemas.items():
            writers[name] = _AtomicParquet(out_dir / f"{name}.parquet", schema)
        summary = PapersSummary(records_in=stream.records_in)
        _route(stream, writers, summary)
        written = {name: writer.close() for name, writer in writers.items()}
        _check_counts(summary, written, drop_path)
    except BaseException:
        for writer in writers.values():
            writer.discard()
        raise
    for writer in writers.values():
        writer.commit()
    logger.info(
        "%s: %d records, %d accepted, %d rejected, %d deleted",
        drop_path.name,
        summary.records_in,
        summary.accepted,
        summary.rejected,
        summary.deleted,
    )
    return summary


@dataclass
class ChunksSummary:
    papers: int = 0
    chunks: int = 0
    full_text_papers: int = 0  # papers whose chunks carry full-text sections
    sections: dict[str, int] = field(default_factory=dict)  # section title -> chunk count


def write_chunks(out_dir: Path, chunker_version: str = CHUNKER_VERSION) -> ChunksSummary:
    """Chunk out_dir/papers.parquet into out_dir/chunks.parquet, streaming and atomically."""
    chunk_paper = chunker(chunker_version)
    out_dir = Path(out_dir)
    papers_path = out_dir / "papers.parquet"
    if not papers_path.is_file():
        raise FileNotFoundError(f"{papers_path} does not exist: write the papers first")
    writer = _AtomicParquet(out_dir / "chunks.parquet", CHUNK_SCHEMA)
    summary, sections = ChunksSummary(), Counter()
    try:
        for batch in pq.ParquetFile(papers_path).iter_batches(batch_size=READ_BATCH_PAPERS):
            for paper in batch.to_pylist():
                chunks = chunk_paper(paper)
                summary.papers += 1
                summary.full_text_papers += chunks[0]["has_full_text"]
                for chunk in chunks:
                    writer.add(chunk)
                    sections[chunk["section"]] += 1
        summary.chunks = writer.close()
    except BaseException:
        writer.discard()
        raise
    writer.commit()
    summary.sections = dict(sections)
    logger.info("%s: %d papers -> %d chunks", out_dir.name, summary.papers, summary.chunks)
    return summary
