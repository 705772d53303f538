"""A retired store's files: the final export of its ledger state, then the files themselves.

The export (`data/retired/<store>-<time>.json`) records, per target, the batches the ledger
says the store held and the digest of the chunk ids and content hashes they make: what the
deleted files held, and what `candlefire unretire` rebuilds from the batch files. A local store
loses its folder; a server's collections are dropped.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from candlefire_pipeline.backends.factory import opened_backend
from candlefire_pipeline.corpus.ledger import expected_chunks
from candlefire_pipeline.fsutil import write_atomic
from candlefire_pipeline.generations.sizes import folder_bytes
from candlefire_pipeline.operations.retirement.rebuild import ledger_view, targets
from candlefire_pipeline.operations.serving.state import Retirement
from candlefire_pipeline.settings import Settings
from candlefire_pipeline.stores import CHROMA


def exports_dir(settings: Settings) -> Path:
    return settings.data_dir / "retired"


def latest_export(settings: Settings, store: str) -> Path | None:
    found = sorted(exports_dir(settings).glob(f"{store}-*.json"))
    return found[-1] if found else None


def local_folder(settings: Settings, store: str) -> Path | None:
    """The store's folder under the data dir, when it is kept locally (None: a server)."""
    if store == CHROMA and settings.chroma_host is None:
        return settings.chroma_path
    return None


def _digest(inventory: dict[str, str]) -> str:
    text = "\n".join(f"{cid}\t{digest}" for cid, digest in sorted(inventory.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def export_ledger(settings: Settings, store: str, retirement: Retirement) -> Path:
    """Write the store's ledger state, per target, before its files go; the file written."""
    now = datetime.now(UTC)
    record = {"store": store, "retired": asdict(retirement), "exported_at": now.isoformat(),
              "targets": []}  # fmt: skip
    for target in targets(settings, store):
        ledger = target.ledger
        view = ledger_view(ledger)
        expected = expected_chunks(ledger.batches_dir, view)
        record["targets"].append({
            "generation": target.generation,
            "batches_dir": str(ledger.batches_dir),
            "applied": ledger.applied(),
            "passed_over": ledger.passed_over(),
            "interrupted": ledger.interrupted(),
            "rebuild_view": view,
            "expected_chunks": len(expected),
            "expected_digest": _digest(expected),
        })  # fmt: skip
    path = exports_dir(settings) / f"{store}-{now.strftime('%Y%m%dT%H%M%SZ')}.json"
    write_atomic(path, json.dumps(record, indent=2, sort_keys=True) + "\n")
    return path


def delete_files(settings: Settings, store: str, say: Callable[[str], None]) -> int:
    """Remove the store's folder (local) or drop its targets' collections (a server); bytes
    freed locally (0 for a server, or when the folder is gone already)."""
    folder = local_folder(settings, store)
    if folder is None:
        for target in targets(settings, store):
            with opened_backend(store, target.settings) as backend:
                backend.drop()
            say(f"dropped {store} collection of generation {target.generation}")
        return 0
    if not folder.exists():
        say(f"{folder} is gone already")
        return 0
    freed = folder_bytes(folder)
    shutil.rmtree(folder)
    say(f"deleted {folder} ({freed / 1e6:.1f} MB)")
    return freed
