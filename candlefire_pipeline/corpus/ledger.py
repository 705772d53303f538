"""Which version of each paper is current across batch directories (batch keys sort in order)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow.parquet as pq

READ_BATCH_ROWS = 65_536


def _batch_dirs(batches_dir: Path, marker: str) -> list[Path]:
    """Batch directories holding `marker`, in batch-key (lexicographic name) order."""
    batches_dir = Path(batches_dir)
    if not batches_dir.is_dir():
        return []
    dirs = [d for d in batches_dir.iterdir() if d.is_dir() and (d / marker).is_file()]
    return sorted(dirs, key=lambda d: d.name)


def _column(path: Path, columns: list[str]) -> Iterator[dict]:
    """Rows of the given columns of a parquet file, streamed; nothing when the file is absent."""
    if not path.is_file():
        return
    for batch in pq.ParquetFile(path).iter_batches(batch_size=READ_BATCH_ROWS, columns=columns):
        yield from batch.to_pylist()


def _pmids(path: Path) -> Iterator[str]:
    return (row["pmid"] for row in _column(path, ["pmid"]))


def superseded_pmids(batches_dir: Path, batch_key: str, pmids: Iterable[str]) -> set[str]:
    """The given pmids that a later batch (holding papers.parquet) accepts or deletes."""
    wanted = set(pmids)
    found: set[str] = set()
    for batch_dir in _batch_dirs(batches_dir, "papers.parquet"):
        if batch_dir.name <= batch_key:
            continue
        for name in ("papers.parquet", "deleted.parquet"):
            found.update(pmid for pmid in _pmids(batch_dir / name) if pmid in wanted)
        if found == wanted:
            break
    return found


def live_papers(
    batches_dir: Path, batch_keys: Iterable[str] | None = None
) -> dict[str, tuple[str, dict[str, str]]]:
    """pmid -> (batch key holding its latest version, {chunk_id: content_hash}) of live papers.

    batch_keys, when given, limits the view to those batches (e.g. the ones a store applied).
    """
    only = None if batch_keys is None else set(batch_keys)
    latest: dict[str, tuple[str, dict[str, str]]] = {}
    for batch_dir in _batch_dirs(batches_dir, "chunks.parquet"):
        if only is not None and batch_dir.name not in only:
            continue
        # A delete in this batch removes earlier versions; this batch's own papers (a re-add
        # within the same file follows its delete) are applied after it.
        for pmid in _pmids(batch_dir / "deleted.parquet"):
            latest.pop(pmid, None)
        fresh: dict[str, tuple[str, dict[str, str]]] = {}
        for row in _column(batch_dir / "chunks.parquet", ["pmid", "chunk_id", "content_hash"]):
            entry = fresh.setdefault(row["pmid"], (batch_dir.name, {}))
            entry[1][row["chunk_id"]] = row["content_hash"]
        latest.update(fresh)  # replace by paper: old chunks of a re-sent paper disappear
    return latest


def expected_chunks(batches_dir: Path, batch_keys: Iterable[str] | None = None) -> dict[str, str]:
    """chunk_id -> content_hash of the latest version of every live paper across batches.

    batch_keys, when given, limits the view to those batches (e.g. the ones a store applied).
    """
    live = live_papers(batches_dir, batch_keys)
    return {cid: digest for _, chunks in live.values() for cid, digest in chunks.items()}


def diff_hashes(expected: dict[str, str], actual: dict[str, str]) -> dict[str, list[str]]:
    """Chunk ids missing from, extra in, or stale in `actual`."""
    return {
        "missing": sorted(expected.keys() - actual.keys()),
        "orphaned": sorted(actual.keys() - expected.keys()),
        "stale": sorted(k for k in expected.keys() & actual.keys() if expected[k] != actual[k]),
    }
