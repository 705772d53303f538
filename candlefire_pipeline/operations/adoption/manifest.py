"""What an import of one app fingerprint planned and how far it got (data/adoption/imports/), and
the import state read back from the ledger's markers (the truth: a manifest only names parts)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from candlefire_pipeline.corpus.ledger import StoreLedger
from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.operations.adoption.staging import ADOPTED_PREFIX
from candlefire_pipeline.operations.retirement.view import written_stores
from candlefire_pipeline.settings import Settings


@dataclass
class ImportManifest:
    fingerprint: str
    #: the n-th import on this deployment: later imports' parts sort after earlier ones
    seq: int
    where: str
    model_id: str
    dim: int
    rows: int = 0
    papers: int = 0
    #: the part size the parts were cut with (a re-run cuts them the same way)
    part_rows: int = 10_000
    #: part batch keys, in order, with their row and paper counts
    parts: list[dict] = field(default_factory=list)
    #: "planned" | "published" (every part in the ledger) | "applied" (in every written store)
    state: str = "planned"
    created_at: str = ""

    @property
    def prefix(self) -> str:
        return f"{ADOPTED_PREFIX}{self.seq:02d}-{self.fingerprint[:8]}-part-"

    def part_key(self, number: int) -> str:
        return f"{self.prefix}{number:04d}"

    @property
    def keys(self) -> list[str]:
        return [part["key"] for part in self.parts]


def imports_dir(settings: Settings) -> Path:
    return settings.adoption_dir / "imports"


def manifest_path(settings: Settings, fingerprint: str) -> Path:
    return imports_dir(settings) / f"{fingerprint[:16]}.json"


def load_manifest(settings: Settings, fingerprint: str) -> ImportManifest | None:
    path = manifest_path(settings, fingerprint)
    return ImportManifest(**json.loads(path.read_text())) if path.is_file() else None


def save_manifest(settings: Settings, manifest: ImportManifest) -> None:
    write_atomic(manifest_path(settings, manifest.fingerprint),
                 json.dumps(asdict(manifest), indent=1))  # fmt: skip


def next_seq(settings: Settings) -> int:
    folder = imports_dir(settings)
    seqs = (
        [json.loads(p.read_text())["seq"] for p in folder.glob("*.json")] if folder.is_dir() else []
    )
    return max(seqs, default=0) + 1


def import_state(settings: Settings, fingerprint: str) -> dict:
    """{state, complete, parts, rows, stores: {store: parts applied}, summary} of the import of
    this fingerprint, read from the ledger (complete: every part applied to every written store)."""
    manifest = load_manifest(settings, fingerprint)
    if manifest is None or not manifest.parts:
        return {"state": "none", "complete": False, "parts": 0, "rows": 0, "stores": {},
                "summary": "not imported"}  # fmt: skip
    keys = set(manifest.keys)
    present = {k for k in keys if (settings.batch_dir(k) / "papers.parquet").is_file()}
    stores = {store: len(keys & set(StoreLedger(settings.batches_dir, store).applied()))
              for store in written_stores(settings)}  # fmt: skip
    complete = present == keys and all(n == len(keys) for n in stores.values())
    shown = ", ".join(f"{store} {n}/{len(keys)}" for store, n in stores.items())
    summary = (
        f"imported ({manifest.rows} rows, {manifest.papers} papers in {len(keys)} parts "
        f"{manifest.prefix}*; {shown})" if complete else
        f"import {manifest.state}, not complete: {len(present)}/{len(keys)} parts in the ledger; "
        f"applied {shown}; run `candlefire adopt import` again to finish it"
    )  # fmt: skip
    return {"state": manifest.state, "complete": complete, "parts": len(keys),
            "rows": manifest.rows, "stores": stores, "summary": summary,
            "prefix": manifest.prefix}  # fmt: skip
