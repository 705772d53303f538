"""What must hold after every kill and the run that follows it: the stores equal the ledger
(nothing lost, nothing twice), the term cache exact, every index valid, used and agreeing with a
scan, the switch readable and agreeing with its history. Each check returns its failures."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from psycopg import sql

from candlefire_pipeline.backends.pg import phrase
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.audit import audit
from candlefire_pipeline.corpus.ledger import StoreLedger, expected_chunks
from candlefire_pipeline.operations.retirement.rebuild import ledger_view
from candlefire_pipeline.operations.serving.history import history
from candlefire_pipeline.operations.serving.state import read_state
from candlefire_pipeline.stores import REFERENCE

#: Nearest-neighbour lists compared between the HNSW index and a sequential scan.
ANN_QUERIES, ANN_K = 8, 10
#: Mean recall@10 of the index against the scan below which the graph is taken as damaged
#: (an intact graph of this size and ef_search answers these exactly or nearly so).
MIN_ANN_RECALL = 0.9
#: Kept term-cache entries checked against a fresh computation per point.
AUDIT_SAMPLE = 40


def ledger_failures(store, batches: Path) -> list[str]:
    """The table holds exactly the ledger's current chunk versions, each once."""
    expected = expected_chunks(batches)
    held = store.chunk_hashes()
    query = sql.SQL("SELECT count(*), count(DISTINCT chunk_id) FROM {t}")
    rows, distinct = store.conn.execute(query.format(t=store.names.ident())).fetchone()
    failures = [f"{rows - distinct} chunks held twice"] if rows != distinct else []
    lost = expected.keys() - held.keys()
    extra = held.keys() - expected.keys()
    stale = [c for c in expected.keys() & held.keys() if expected[c] != held[c]]
    for label, ids in (("lost", lost), ("not in the ledger", extra), ("stale", stale)):
        if ids:
            failures.append(f"{len(ids)} chunks {label} (e.g. {sorted(ids)[:3]})")
    return failures


def term_cache_failures(store) -> tuple[list[str], int]:
    """(differences from a fresh computation, entries kept)."""
    content, cache = schema.versions(store.conn, store.names)
    failures = [f"term cache at version {cache}, content at {content}"] if content != cache else []
    report = audit(store, sample=AUDIT_SAMPLE)
    return failures + report.differences[:5], report.checked


def index_failures(store) -> list[str]:
    """Every index of the table valid and ready; B-tree and GIN ones pass amcheck."""
    conn = store.conn
    conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
    rows = conn.execute(
        "SELECT c.relname, am.amname, i.indisvalid AND i.indisready FROM pg_index i"
        " JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = c.relam"
        " WHERE i.indrelid = to_regclass(%s)",
        [store.names.ident().as_string(conn)],
    ).fetchall()
    failures = [f"index {name} is not valid" for name, _, valid in rows if not valid]
    checks = {"btree": "SELECT bt_index_check(%s::regclass, true)",
              "gin": "SELECT gin_index_check(%s::regclass)"}  # fmt: skip
    for name, method, valid in rows:
        if valid and method in checks:
            try:
                conn.execute(checks[method], [sql.Identifier(name).as_string(conn)])
            except Exception as exc:  # amcheck's finding is the failure to report
                failures.append(f"amcheck {name}: {str(exc).splitlines()[0]}")
    if phrase.state(conn, store.names, store.substring_mode) != "valid":
        failures.append("the phrase index is not valid")
    return failures


def _plan(conn, query: sql.Composed, params: list) -> str:
    return "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + query, params))


def _scanned(conn, query: sql.Composed, params: list, index: bool) -> tuple[list, str]:
    """The query's rows with the index as the only way (index) or with no index at all."""
    with conn.transaction():
        off = ("enable_seqscan",) if index else ("enable_indexscan", "enable_bitmapscan")
        for setting in off:
            conn.execute(f"SET LOCAL {setting} = off")
        conn.execute("SET LOCAL hnsw.ef_search = 100")
        return [r[0] for r in conn.execute(query, params)], _plan(conn, query, params)


def ann_failures(store, rng: np.random.Generator) -> tuple[list[str], float]:
    """The HNSW index is used and its neighbours agree with a sequential scan's."""
    conn, names = store.conn, store.names
    sample = sql.SQL("SELECT embedding FROM {t} ORDER BY random() LIMIT %s")
    rows = conn.execute(sample.format(t=names.ident()), [ANN_QUERIES]).fetchall()
    vectors = [np.asarray(r[0].to_numpy(), dtype=np.float32) for r in rows]
    query = sql.SQL("SELECT chunk_id FROM {t} ORDER BY embedding <=> %s LIMIT %s").format(
        t=names.ident()
    )
    recalls, failures = [], []
    for vector in vectors:
        noisy = vector + rng.normal(0, 0.01, len(vector)).astype(np.float32)
        params = [noisy, ANN_K]
        walked, plan = _scanned(conn, query, params, index=True)
        exact, _ = _scanned(conn, query, params, index=False)
        if names.hnsw.as_string(conn).strip('"') not in plan:
            failures.append(f"the HNSW index is not used: {plan.splitlines()[0]}")
        recalls.append(len(set(walked) & set(exact)) / max(len(exact), 1))
    recall = float(np.mean(recalls)) if recalls else 1.0
    if recall < MIN_ANN_RECALL:
        failures.append(f"HNSW recall@{ANN_K} {recall:.2f} against a sequential scan")
    return failures, recall


def trigram_failures(store, words: list[str]) -> list[str]:
    """The trigram GIN is used for LIKE '%word%' and finds what a sequential scan finds."""
    conn, names = store.conn, store.names
    query = sql.SQL("SELECT chunk_id FROM {t} WHERE document LIKE %s ORDER BY chunk_id").format(
        t=names.ident()
    )
    failures = []
    for word in words:
        params = [f"%{word}%"]
        indexed, plan = _scanned(conn, query, params, index=True)
        scanned, _ = _scanned(conn, query, params, index=False)
        if names.trgm.as_string(conn).strip('"') not in plan:
            failures.append(f"LIKE %{word}% does not use the trigram index")
        if indexed != scanned:
            failures.append(f"LIKE %{word}%: index {len(indexed)} rows, scan {len(scanned)}")
    return failures


def switch_failures(settings, dsn: str) -> list[str]:
    """The switch file reads, and the newest history row in Postgres is its current state."""
    try:
        state = read_state(settings.serving_file)
    except ValueError as exc:
        return [f"the switch is unreadable: {exc}"]
    if state.changed_at is None:
        return []
    rows = history(dsn, limit=None)
    if not rows:
        return ["the switch changed but its history is empty"]
    failures = []
    if rows[0]["reason"] != state.reason:
        failures.append(f"history's newest change {rows[0]['reason']!r} != the switch's "
                        f"{state.reason!r}")  # fmt: skip
    if len({r["entry_id"] for r in rows}) != len(rows):
        failures.append("a history entry is recorded twice")
    return failures


def chroma_failures(chroma, batches: Path) -> list[str]:
    """Chroma holds exactly the current versions of its ledger view (unretire's target)."""
    view = ledger_view(StoreLedger(batches, REFERENCE))
    expected = expected_chunks(batches, view)
    held = chroma.chunk_hashes()
    if held == expected:
        return []
    lost = len(expected.keys() - held.keys())
    extra = len(held.keys() - expected.keys())
    stale = sum(1 for c in expected.keys() & held.keys() if expected[c] != held[c])
    return [f"chroma: {lost} chunks lost, {extra} not in the ledger, {stale} stale"]
