"""A model folder's content hash, re-read only when one of its files changed.

An ONNX export is named by the hash of the model's original weights (onnx_artifacts.py), so
every start hashed the whole folder (90 MB for MiniLM, 0.12 s of CPU; BioLORD's 440 MB, by
size, about five times that) before using an export it already had. The hash is kept in the
export cache beside every file's (path, size, mtime, ctime, inode) and reused while all of
them are unchanged. Writing a file changes its ctime, which file tools cannot set (unlike mtime:
`touch -d`, `cp -p`, `rsync -t` set it), and a reinstalled package or a copied folder has new
inodes. A record is kept only when no file changed within RACY_S of the hash and none changed
during it: a file written in the same clock tick as the record could change again without its
stat changing (git's "racy" index entries).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import uuid
from pathlib import Path

from candlefire_pipeline.embedding import model_files

log = logging.getLogger(__name__)

RECORD_FORMAT = 1
#: Seconds a file must have been left alone before its stat may vouch for its content.
RACY_S = 2.0
RECORDS = ".weights-hashes"


def _stats(folder: Path) -> list[list]:
    """(relative path, size, mtime_ns, ctime_ns, inode) of every file the hash reads."""
    out = []
    for path in model_files.weight_files(folder):
        st = path.stat()
        out.append([str(path.relative_to(folder)), st.st_size, st.st_mtime_ns, st.st_ctime_ns,
                    st.st_ino])  # fmt: skip
    return out


def _record_path(folder: Path, cache_dir: Path) -> Path:
    key = hashlib.blake2b(str(folder).encode(), digest_size=16).hexdigest()
    return Path(cache_dir) / RECORDS / f"{folder.name}-{key}.json"


def _read(path: Path, folder: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if record.get("format") != RECORD_FORMAT or record.get("folder") != str(folder):
        return None
    return record


def known_weights_hash(folder: Path, cache_dir: Path) -> str:
    """model_files.weights_hash(folder), from the record in `cache_dir` while it holds."""
    folder = Path(folder).resolve()
    path = _record_path(folder, cache_dir)
    before = _stats(folder)
    record = _read(path, folder)
    if record is not None and record["files"] == before:
        return record["hash"]
    started = time.time_ns()
    digest = model_files.weights_hash(folder)
    newest = max((max(s[2], s[3]) for s in before), default=0)
    if _stats(folder) == before and started - newest > RACY_S * 1e9:
        _write(path, {"format": RECORD_FORMAT, "folder": str(folder), "hash": digest,
                      "files": before})  # fmt: skip
    else:
        log.info("the weights in %s changed lately: their hash is not recorded yet", folder)
    return digest


def _write(path: Path, record: dict) -> None:
    """Published by a rename: a reader sees a whole record or none."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".tmp-{path.name}-{uuid.uuid4().hex[:8]}")
        tmp.write_text(json.dumps(record))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only cache still serves: the hash is made every time
        log.warning("cannot record the weights hash in %s: %s", path.parent, exc)
