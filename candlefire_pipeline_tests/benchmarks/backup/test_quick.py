"""The backup benchmark's --quick smoke run: a real embedded server backed up, lost to a
SIGKILL and a deleted data directory, restored; the section printed, docs/BENCHMARKS.md not
written."""

from __future__ import annotations

import pyarrow as pa
import pytest

from benchmarks import __main__ as cli
from benchmarks.backup.run import first_merged
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
    assert "(1 of 4 drops accepted after the backup; the first drop " in row
    assert "missing 0," not in out.split("What the restore found")[1].split(".")[0]
    assert "(btree, gin, hnsw)" in out and "recall@10" in out
    assert "; 0 term cache entries" not in out  # the kept terms were audited
    assert not (tmp_path / "BENCHMARKS.md").exists()


@pytest.mark.parametrize(("count", "sizes"), [(1, [2, 3, 4]), (2, [5, 4]), (3, [9]), (5, [9])])
def test_the_first_drops_merge_into_one_first_build(count, sizes):
    slices = iter(pa.table({"n": list(range(k))}) for k in (2, 3, 4))
    assert [t.num_rows for t in first_merged(slices, count)] == sizes
