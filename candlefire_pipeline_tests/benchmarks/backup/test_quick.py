"""The backup benchmark's --quick smoke run: a real embedded server backed up, lost to a
SIGKILL and a deleted data directory, restored; the section printed, docs/BENCHMARKS.md not
written."""

from __future__ import annotations

import pytest

from benchmarks import __main__ as cli
from benchmarks.common import section

#: every test here starts an embedded Postgres of its own
pytestmark = pytest.mark.server


def test_the_quick_run_restores_what_the_ledger_holds_and_writes_nothing(
    shared_data, tmp_path, monkeypatch, capsys
):

    monkeypatch.setenv("CANDLEFIRE_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("CANDLEFIRE_BENCH_DIR", str(tmp_path / "bench"))
    monkeypatch.setenv("CANDLEFIRE_EMBED_MODEL", "hashing-v1")
    monkeypatch.setattr(section, "BENCHMARKS_MD", tmp_path / "BENCHMARKS.md")
    assert cli.main(["backup", "--quick"]) == 0
    out = capsys.readouterr().out
    # the run raises unless the restored store equals the ledger chunk for chunk
    row = next(line for line in out.splitlines() if line.startswith("| 2,000 |"))
    assert "(1 of 4 drops accepted after the backup)" in row
    assert "missing 0," not in out.split("What the restore found")[1].split(".")[0]
    assert "(btree, gin, hnsw)" in out and "recall@10" in out
    assert "; 0 term cache entries" not in out  # the kept terms were audited
    assert not (tmp_path / "BENCHMARKS.md").exists()
