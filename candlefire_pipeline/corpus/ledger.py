"""The ledger: which batches each store applied, and which version of each paper is current.

Everything lives in the batch directories (`data/batches/<batch_key>/`, keys sort in drop
order): the parquet files say what each batch accepts and deletes; per store, an intent marker
(`applying-<store>.json`) is left before a write and an applied marker (`applied-<store>.json`)
records a finished apply; a retired store's step leaves `retired-<store>.json` instead (the batch
it passed over, which its way back must write). From them:

- `StoreLedger(batches_dir, store)`: one store's applied and interrupted batches, the markers
  an apply writes, the papers a later applied batch supersedes, the chunks it should hold;
- `live_papers` / `expected_chunks`: the current version of every paper over some batches;
- `snapshot`: every store's applied batches at once (what a parity report ran on);
- `diff_inventory`: THE comparison of an expected inventory with a held one
  (missing / stale / orphaned), used by repair, the store checks and parity tracing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq

from candlefire_pipeline.fsutil import is_hidden, write_atomic

READ_BATCH_ROWS = 65_536
#: Marker files in a batch directory, per store.
APPLIED = "applied-{store}.json"
INTENT = "applying-{store}.json"
PASSED_OVER = "retired-{store}.json"

#: store -> {batch_key: applied_at}: every store's applied batches at one moment.
Snapshot = dict[str, dict[str, float]]
#: chunk_id -> content_hash: what a store holds, or should hold.
Inventory = Mapping[str, str]


@dataclass(frozen=True)
class InventoryDiff:
    """How a held inventory differs from the expected one (chunk ids, sorted)."""

    #: expected, not held
    missing: list[str]
    #: held, not expected
    orphaned: list[str]
    #: held with another content hash than expected
    stale: list[str]

    @property
    def clean(self) -> bool:
        return not (self.missing or self.orphaned or self.stale)

    def as_dict(self) -> dict[str, list[str]]:
        return {"missing": self.missing, "orphaned": self.orphaned, "stale": self.stale}

    def counts(self) -> dict[str, int]:
        return {kind: len(ids) for kind, ids in self.as_dict().items()}


def diff_inventory(expected: Inventory, held: Inventory) -> InventoryDiff:
    """Chunk ids missing from, orphaned in, or stale in `held`, compared with `expected`."""
    return InventoryDiff(
        missing=sorted(expected.keys() - held.keys()),
        orphaned=sorted(held.keys() - expected.keys()),
        stale=sorted(k for k in expected.keys() & held.keys() if expected[k] != held[k]),
    )


@dataclass(frozen=True)
class StoreLedger:
    """One store's record in the batch directories: what it applied, what was cut midway."""

    batches_dir: Path
    #: the store's name; it names the marker files
    store: str

    @property
    def applied_marker(self) -> str:
        """The file in a batch directory that records the batch was applied to this store."""
        return APPLIED.format(store=self.store)

    @property
    def intent_marker(self) -> str:
        return INTENT.format(store=self.store)

    def applied(self) -> dict[str, float]:
        """batch_key -> when it was last applied to this store (epoch seconds)."""
        markers = sorted(Path(self.batches_dir).glob(f"*/{self.applied_marker}"))
        return {m.parent.name: json.loads(m.read_text())["applied_at"] for m in markers}

    @property
    def passed_over_marker(self) -> str:
        return PASSED_OVER.format(store=self.store)

    def passed_over(self) -> list[str]:
        """Batch keys the store's step left unwritten while the store was retired, in order."""
        return self._marked(self.passed_over_marker)

    def pass_over(self, batch_key: str, record: dict) -> None:
        """The store is retired: its step writes nothing and records that it passed over."""
        self._write(batch_key, self.passed_over_marker, record)

    def mark_rebuilt(self, batch_key: str, record: dict) -> None:
        """A rebuild from the ledger made the store hold this batch's current versions: it is
        applied (`record` holds `applied_at`); nothing is left to finish or to write."""
        self.finish(batch_key, record)
        (Path(self.batches_dir) / batch_key / self.passed_over_marker).unlink(missing_ok=True)

    def interrupted(self) -> list[str]:
        """Batch keys whose last apply began writing and never completed, in order."""
        return self._marked(self.intent_marker)

    def begin(self, batch_key: str, record: dict) -> None:
        """Before the first write of an apply: what the next apply must finish if this one dies."""
        self._write(batch_key, self.intent_marker, record)

    def finish(self, batch_key: str, record: dict) -> None:
        """The apply completed: record it (`record` holds `applied_at`), drop the intent."""
        self._write(batch_key, self.applied_marker, record)
        (Path(self.batches_dir) / batch_key / self.intent_marker).unlink(missing_ok=True)

    def superseded(self, batch_key: str, pmids: Iterable[str]) -> set[str]:
        """The given pmids that a later batch already applied to this store accepts or deletes."""
        return superseded_pmids(self.batches_dir, batch_key, pmids, marker=self.applied_marker)

    def superseding(self, batch_key: str, pmids: Iterable[str]) -> dict[str, set[str]]:
        """Later-named batch already applied to this store -> the given pmids it holds a newer
        version of (or deletes): what holds this batch's papers back."""
        return superseding_batches(self.batches_dir, batch_key, pmids, self.applied_marker)

    def expected_chunks(self) -> dict[str, str]:
        """chunk_id -> content_hash the store should hold: the current versions of its batches."""
        return expected_chunks(self.batches_dir, self.applied())

    def _marked(self, marker: str) -> list[str]:
        """Batch keys whose directory holds `marker`, in order."""
        return sorted(m.parent.name for m in Path(self.batches_dir).glob(f"*/{marker}"))

    def _write(self, batch_key: str, marker: str, record: dict) -> None:
        write_atomic(Path(self.batches_dir) / batch_key / marker, json.dumps(record, indent=2))


def snapshot(batches_dir: Path, stores: Sequence[str]) -> Snapshot:
    """store -> {batch_key: applied_at}: the ledger state a parity report runs on."""
    return {store: StoreLedger(batches_dir, store).applied() for store in stores}


def _batch_dirs(batches_dir: Path, marker: str) -> list[Path]:
    """Batch directories holding `marker`, in batch-key (lexicographic name) order."""
    batches_dir = Path(batches_dir)
    if not batches_dir.is_dir():
        return []
    dirs = [d for d in batches_dir.iterdir()
            if d.is_dir() and not is_hidden(d) and (d / marker).is_file()]  # fmt: skip
    return sorted(dirs, key=lambda d: d.name)


def _column(path: Path, columns: list[str]) -> Iterator[dict]:
    """Rows of the given columns of a parquet file, streamed; nothing when the file is absent."""
    if not path.is_file():
        return
    for batch in pq.ParquetFile(path).iter_batches(batch_size=READ_BATCH_ROWS, columns=columns):
        yield from batch.to_pylist()


def _pmids(path: Path) -> Iterator[str]:
    return (row["pmid"] for row in _column(path, ["pmid"]))


def superseded_pmids(
    batches_dir: Path, batch_key: str, pmids: Iterable[str], marker: str = "papers.parquet"
) -> set[str]:
    """The given pmids that a later batch (holding `marker`) accepts or deletes.

    With a store's applied marker, "later" means later batches that store already holds: the
    store then always equals expected_chunks() of its applied batches, whatever order they
    arrive in, and a later batch that fails before reaching the store blocks nothing.
    """
    wanted = set(pmids)
    found: set[str] = set()
    for batch_dir in _batch_dirs(batches_dir, marker):
        if batch_dir.name <= batch_key:
            continue
        for name in ("papers.parquet", "deleted.parquet"):
            found.update(pmid for pmid in _pmids(batch_dir / name) if pmid in wanted)
        if found == wanted:
            break
    return found


def superseding_batches(
    batches_dir: Path, batch_key: str, pmids: Iterable[str], marker: str
) -> dict[str, set[str]]:
    """Each later batch (holding `marker`) -> the given pmids it accepts or deletes."""
    wanted = set(pmids)
    found: dict[str, set[str]] = {}
    for batch_dir in _batch_dirs(batches_dir, marker):
        if batch_dir.name <= batch_key or not wanted:
            continue
        for name in ("papers.parquet", "deleted.parquet"):
            held = {pmid for pmid in _pmids(batch_dir / name) if pmid in wanted}
            if held:
                found.setdefault(batch_dir.name, set()).update(held)
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
