"""Streaming XML records: one record element built at a time, within byte and text limits.

ElementTree's iterparse builds an element's whole text before anyone can look at it (one
600 MB title costs ~1.9 GB). Here a parser target sees every start tag, text piece and end tag
as expat delivers them: a record (a child of the root) that passes a limit stops being built at
that moment and comes out as an Oversized marker, so memory stays at one bounded record whatever
the input. The parser is defusedxml's: entity declarations and external references are refused.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.etree.ElementTree import Element, TreeBuilder

from defusedxml.ElementTree import DefusedXMLParser

from candlefire_pipeline.corpus.capped import CappedStream
from candlefire_pipeline.corpus.records import DropFileError
from candlefire_pipeline.settings import IngestLimits

READ_CHUNK = 64 * 1024
#: Elements in one record; bounds the tree a record of tiny empty tags could build (~60 MB).
MAX_RECORD_ELEMENTS = 500_000
#: Characters kept of a record's id (for the reject row of an oversized record).
ID_CHARS = 64


@dataclass(frozen=True)
class Oversized:
    """A record that passed a limit; it was skipped, not built."""

    tag: str
    record_id: str | None
    reason: str  # "too_large: ..."


class _RecordTarget:
    """Parser target: builds each child of the root with a fresh TreeBuilder, within limits.

    Called by expat for every tag and text piece, so the methods stay lean: byte positions
    are read at a record's start and at the first event after its end (an empty-element record
    ends where it starts), and the driver checks the bytes fed after every chunk.
    """

    def __init__(
        self,
        path: Path,
        limits: IngestLimits,
        roots: Sequence[str],
        id_paths: tuple[tuple[str, ...], ...],
    ) -> None:
        self.file, self.limits, self.roots, self.id_paths = path, limits, tuple(roots), id_paths
        self.id_top = 1 + max((len(p) for p in id_paths), default=0)
        self.max_chars = limits.max_element_chars
        self.expat = None  # set by iter_records: byte positions of record starts and ends
        self.depth = 0
        self.events = 0
        self.ended = False  # a record's end tag was seen; its size is known at the next event
        self.finished: list[Element | Oversized] = []
        self._reset()

    def _reset(self) -> None:
        self.builder: TreeBuilder | None = None
        self.record_tag, self.record_start, self.elements, self.text_run = "", 0, 0, 0
        self.problem: str | None = None
        self.stack: list[str] = []  # open tags, the record's first
        self.record_id: str | None = None
        self.id_parts: list[str] | None = None

    # parser target protocol --------------------------------------------------------------
    def start(self, tag: str, attrib: dict) -> None:
        self.events += 1
        if self.ended:
            self._settle()
        self.depth += 1
        if self.depth <= 2:
            if self.depth == 1:
                self._check_root(tag)
                return
            self._reset()
            self.builder, self.record_tag = TreeBuilder(), tag
            self.record_start = self.expat.CurrentByteIndex
        self.text_run = 0
        self.elements += 1
        stack = self.stack
        stack.append(tag)
        if len(stack) <= self.id_top and self.record_id is None:
            if tuple(stack[1:]) in self.id_paths:
                self.id_parts = []
        if self.elements > MAX_RECORD_ELEMENTS:
            self.fail(f"record has more than {MAX_RECORD_ELEMENTS} elements")
        if self.builder is not None:
            self.builder.start(tag, attrib)

    def data(self, text: str) -> None:
        self.events += 1
        if self.depth < 2:
            if self.ended:
                self._settle()
            return
        self.text_run += len(text)
        if self.id_parts is not None:
            self.id_parts.append(text[:ID_CHARS])
        if self.text_run > self.max_chars:
            self.fail(f"<{self.stack[-1]}> text exceeds {self.max_chars} characters")
        if self.builder is not None:
            self.builder.data(text)

    def end(self, tag: str) -> None:
        self.events += 1
        if self.ended:
            self._settle()
        if self.depth >= 2:
            self.text_run = 0
            if self.builder is not None:
                self.builder.end(tag)
            if self.id_parts is not None:
                self.record_id = "".join(self.id_parts).strip()[:ID_CHARS] or None
                self.id_parts = None
            self.stack.pop()
            self.ended = self.depth == 2
        self.depth -= 1

    def comment(self, text: str) -> None:
        self.events += 1
        if self.ended:
            self._settle()

    def pi(self, target: str, text: str | None = None) -> None:
        self.events += 1
        if self.ended:
            self._settle()

    def close(self) -> None:
        if self.ended:
            self._settle()

    # limits ------------------------------------------------------------------------------
    def _check_root(self, tag: str) -> None:
        if tag not in self.roots:
            raise DropFileError(
                f"{self.file}: root element <{tag}> is not one of {', '.join(self.roots)}"
            )

    def fail(self, problem: str) -> None:
        """Stop building the current record (its partial tree is dropped now)."""
        if self.problem is None:
            self.problem, self.builder = problem, None

    def check_bytes(self, position: int) -> None:
        """Fail the open record once `position` is past its byte limit."""
        limit = self.limits.max_record_bytes
        if self.depth >= 2 and position - self.record_start > limit:
            self.fail(f"record exceeds {limit} bytes")

    def _settle(self) -> None:
        """The record before this event is complete: check its size, then hand it out."""
        self.ended = False
        limit = self.limits.max_record_bytes
        if self.expat.CurrentByteIndex - self.record_start > limit:
            self.fail(f"record exceeds {limit} bytes")
        self._finish()

    def _finish(self) -> None:
        if self.builder is None:
            reason = f"too_large: {self.problem}"
            self.finished.append(Oversized(self.record_tag, self.record_id, reason))
        else:
            self.finished.append(self.builder.close())
        self._reset()

    def take(self) -> list[Element | Oversized]:
        done, self.finished = self.finished, []
        return done


def iter_records(
    stream: CappedStream,
    path: Path,
    limits: IngestLimits,
    roots: Sequence[str],
    id_paths: Sequence[tuple[str, ...]] = (),
) -> Iterator[Element | Oversized]:
    """Each child of the root element, in order: an Element, or Oversized when past a limit.

    `id_paths` (tag paths below a record, e.g. ("MedlineCitation", "PMID")) name the element
    whose text identifies an oversized record in its reject row.
    """
    target = _RecordTarget(path, limits, roots, tuple(id_paths))
    parser = DefusedXMLParser(
        target=target, forbid_dtd=False, forbid_entities=True, forbid_external=True
    )
    target.expat = parser.parser
    fed = silent = 0
    while chunk := stream.read(READ_CHUNK):
        events = target.events
        parser.feed(chunk)
        fed += len(chunk)
        target.check_bytes(fed)
        yield from target.take()
        # expat keeps an unfinished token (a tag, an attribute, a comment) in memory until it
        # ends: past the record limit without any event, the drop is refused.
        silent = silent + len(chunk) if target.events == events else 0
        if silent > limits.max_record_bytes:
            raise DropFileError(
                f"{path}: no complete XML token in the {silent} bytes before byte {fed} "
                f"(limit {limits.max_record_bytes}): a tag, attribute, comment or declaration "
                "that large is refused"
            )
    parser.close()
    yield from target.take()
