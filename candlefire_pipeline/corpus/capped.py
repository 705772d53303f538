"""A drop file's content stream that refuses to go past the drop's decompressed-bytes limit."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from candlefire_pipeline.corpus.records import DropFileError
from candlefire_pipeline.fsutil import open_maybe_gzip


class CappedStream:
    """Counts the (decompressed) bytes read and raises DropFileError once they pass `limit`."""

    def __init__(self, stream: BinaryIO, limit: int, path: Path) -> None:
        self._stream, self.limit, self.path = stream, limit, path
        self.bytes_read = 0

    def read(self, size: int) -> bytes:
        return self._count(self._stream.read(size))

    def readline(self, size: int) -> bytes:
        return self._count(self._stream.readline(size))

    def _count(self, data: bytes) -> bytes:
        self.bytes_read += len(data)
        if self.bytes_read > self.limit:
            raise DropFileError(
                f"{self.path}: content exceeds the drop limit of {self.limit} decompressed bytes "
                "(max_drop_bytes); the drop is refused as a whole"
            )
        return data


@contextmanager
def open_capped(path: Path, limit: int) -> Iterator[CappedStream]:
    """The file's content (gunzipped when it ends in .gz), capped at `limit` bytes; a file that
    cannot be read to its end (I/O error, truncated or corrupt gzip) is a DropFileError."""
    try:
        with open_maybe_gzip(path) as stream:
            yield CappedStream(stream, limit, Path(path))
    except (OSError, EOFError, zlib.error) as err:
        raise DropFileError(f"{path}: unreadable: {err}") from err
