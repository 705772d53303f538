"""The backup benchmark's section of docs/BENCHMARKS.md."""

from __future__ import annotations


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def markdown(results: list[dict], load_note: str, model: str) -> str:
    rows = [
        "| chunks | backup (pg_basebackup + pg_verifybackup) | base bytes | WAL archived | restore "
        "total | of it: base copied + WAL replayed | chunks re-applied from the ledger |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        rows.append(
            f"| {r['size']:,} | {r['backup_seconds']:.1f} s | {_mb(r['backup_bytes'])} | "
            f"{_mb(r['wal_bytes'])} | {r['restore_seconds']:.1f} s | {r['replay_seconds']:.1f} s "
            f"| {r['rows_written']:,} ({r['after']} of {r['drops']} drops accepted after the "
            f"backup; the first drop {r['first_rows']:,} chunks) |"
        )
    checks = "; ".join(f"{r['size']:,}: {r['checks']}" for r in results)
    found = "; ".join(
        f"{r['size']:,}: " + ", ".join(f"{k} {v:,}" for k, v in r["found"].items()) for r in results
    )
    return "\n".join([
        "### Backup and restore (`python -m benchmarks backup`)",
        "",
        f"The workload ({model} vectors) written as drops and applied to pgvector on an embedded "
        "server of the run's own; WAL archiving on; `backup take` after all but the last drops; "
        "those applied; every server process SIGKILLed and data/pg deleted; `restore` (the base "
        "copied to a staging directory, WAL replayed to the end of the archive, the ledger "
        "re-applied, amcheck on every B-tree and GIN index, the ANN index against an exact scan, "
        "the term cache against a fresh computation, then swapped in). The restored store equals "
        "the ledger chunk for chunk at every size.",
        "",
        *rows,
        "",
        f"What the restore found after the replay, before re-applying: {found} (the WAL the "
        f"kill took with it). Checks: {checks}.",
        "",
        *([] if any(r["size"] >= 1_000_000 for r in results) else [
            "1,000,000 chunks: not measured in this run (`--sizes 62196,1000000`).", ""]),
        load_note,
    ])  # fmt: skip
