"""Peak memory of parsing hostile drops, measured in a child process (VmHWM from /proc).

The drops are generated on the fly and stream-compressed: the test itself never holds them.
Before the streaming limits, the 600 MB MEDLINE title cost ~1.9 GB of RSS before its record
was rejected; now every case stays within BOUND_MB of the child's baseline.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

from candlefire_pipeline_tests.corpus.bad_inputs import article, line, rec

#: "a few hundred MB above baseline whatever the input" (measured: ~50 MB for every case).
BOUND_MB = 250
MB = 1 << 20
BLOCK = b"A" * MB


def probe(drop: Path, out_dir: Path, **env: str) -> dict:
    """write_papers(drop) in a fresh interpreter; its outcome and peak RSS above baseline."""
    result = subprocess.run(
        [sys.executable, "-m", "candlefire_pipeline_tests.reliability.memory_probe", drop, out_dir],
        env=os.environ | env,
        capture_output=True,
        text=True,
        check=True,
        timeout=900,
    )
    outcome = json.loads(result.stdout.splitlines()[-1])
    outcome["above_baseline_mb"] = (outcome["peak_kb"] - outcome["baseline_kb"]) / 1024
    return outcome


def medline_with_huge_title(path: Path, title_mb: int) -> None:
    with gzip.open(path, "wb", compresslevel=1) as out:
        out.write(b"<?xml version='1.0'?><PubmedArticleSet>" + article("1").encode())
        out.write(b"<PubmedArticle><MedlineCitation><PMID>2</PMID><Article><ArticleTitle>")
        for _ in range(title_mb):
            out.write(BLOCK)
        out.write(b"</ArticleTitle></Article></MedlineCitation></PubmedArticle>")
        out.write(article("3").encode() + b"</PubmedArticleSet>")


def jsonl_bomb(path: Path, line_mb: int, newline: bool) -> None:
    """A good record, then one line of `line_mb` MB of "[" (gzip members, ~16 KB per 16 MB)."""
    block = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
    member = block.compress(b"[" * (16 * MB)) + block.flush()
    with path.open("wb") as out:
        out.write(gzip.compress(line(rec("1"))))
        for _ in range(line_mb // 16):
            out.write(member)
        out.write(gzip.compress((b"\n" if newline else b"") + line(rec("3"))))


def test_600_mb_medline_title_is_rejected_with_bounded_memory(tmp_path):
    drop = tmp_path / "title.xml.gz"
    medline_with_huge_title(drop, 600)
    outcome = probe(drop, tmp_path / "out")
    assert (outcome["accepted"], outcome["rejected"]) == (2, 1), outcome
    assert outcome["above_baseline_mb"] < BOUND_MB, outcome


def test_600_mb_jsonl_line_is_rejected_with_bounded_memory(tmp_path):
    drop = tmp_path / "line.jsonl.gz"
    jsonl_bomb(drop, 608, newline=True)
    outcome = probe(drop, tmp_path / "out")
    assert (outcome["accepted"], outcome["rejected"]) == (2, 1), outcome
    assert outcome["above_baseline_mb"] < BOUND_MB, outcome


def test_gzip_jsonl_bomb_past_the_drop_limit_is_refused_with_bounded_memory(tmp_path):
    drop = tmp_path / "bomb.jsonl.gz"
    jsonl_bomb(drop, 2048, newline=False)  # 2 GiB decompressed from ~2 MB
    assert drop.stat().st_size < 4 * MB
    outcome = probe(drop, tmp_path / "out", CANDLEFIRE_MAX_DROP_BYTES=str(1024 * MB))
    assert "exceeds the drop limit of 1073741824 decompressed bytes" in outcome["error"]
    assert outcome["above_baseline_mb"] < BOUND_MB, outcome
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
