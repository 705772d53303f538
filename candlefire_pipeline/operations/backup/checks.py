"""What a restore checks rather than assumes: every index valid and passing amcheck (B-tree
with every heap tuple looked up, GIN by PG18's gin_index_check), each pgvector index used and
agreeing with an exact scan on sample queries, the term cache equal to a fresh computation, the
phrase index valid."""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.pg import phrase
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.terms.audit import audit

#: Stored vectors asked again through the ANN index and by an exact scan.
SAMPLES = 20
TOP = 10
#: Mean recall@TOP of the index against the exact scan below which the index is not trusted.
MIN_RECALL = 0.9
#: amcheck function per index access method (hnsw has none: the sample queries check it).
AMCHECK = {
    "btree": "SELECT bt_index_check(%s::regclass, true)",
    "gin": "SELECT gin_index_check(%s::regclass)",
}


@dataclass
class CheckReport:
    #: index -> access method, for every index amcheck (or the sample queries) passed
    indexes: dict[str, str] = field(default_factory=dict)
    #: table -> mean recall@TOP of its pgvector index against an exact scan
    recall: dict[str, float] = field(default_factory=dict)
    #: table -> term cache entries compared with a fresh computation
    term_entries: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        methods = sorted(set(self.indexes.values()))
        recall = ", ".join(f"{t} {r:.3f}" for t, r in sorted(self.recall.items()))
        terms = sum(self.term_entries.values())
        said = (f"{len(self.indexes)} indexes checked ({', '.join(methods)}); ANN recall@{TOP} "
                f"vs exact: {recall or 'no table'}; {terms} term cache entries exact")  # fmt: skip
        return said if self.ok else f"{said}; PROBLEMS: {'; '.join(self.problems)}"


def check_indexes(dsn: str, report: CheckReport) -> None:
    """Every index of the database valid; B-tree and GIN ones through amcheck."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        except psycopg.Error as exc:
            report.problems.append(f"amcheck is not available: {exc.diag.message_primary}")
            return
        rows = conn.execute(
            "SELECT i.indexrelid::regclass::text, am.amname, i.indisvalid AND i.indisready "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am am ON am.oid = "
            "c.relam JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public'"
        ).fetchall()
        for name, method, valid in rows:
            if not valid:
                report.problems.append(f"index {name} ({method}) is invalid")
                continue
            if method in AMCHECK:
                try:
                    conn.execute(AMCHECK[method], [name])
                except psycopg.Error as exc:
                    report.problems.append(f"amcheck: {name}: {exc.diag.message_primary}")
                    continue
            report.indexes[name] = method


def check_store(backend, report: CheckReport) -> None:
    """One pgvector table: its index against an exact scan, its term cache, its phrase index."""
    table = backend.names.table
    if backend.stored_model() is None:
        return
    report.recall[table] = _ann_recall(backend, report)
    if report.recall[table] < MIN_RECALL:
        report.problems.append(f"{table}: ANN recall@{TOP} {report.recall[table]:.3f} vs exact")
    cache = audit(backend)
    report.term_entries[table] = cache.checked
    report.problems += [f"{table}: term cache: {d}" for d in cache.differences[:5]]
    found = phrase.state(backend.conn, backend.names, backend.substring_mode)
    if found == "invalid":
        report.problems.append(f"{table}: the phrase index is invalid")


def _ann_recall(backend, report: CheckReport) -> float:
    """Mean recall@TOP of the ANN index (forced) against an exact scan, on stored vectors."""
    conn, names, dim = backend.conn, backend.names, backend.stored_model()[1]
    vectors = [row[0] for row in conn.execute(sql.SQL(
        "SELECT embedding::vector FROM {} ORDER BY md5(chunk_id) LIMIT %s"
    ).format(names.ident()), [SAMPLES]).fetchall()]  # fmt: skip
    if not vectors:
        return 1.0
    candidates = backend.layout.candidates(TOP, backend.ann.rerank_factor)
    exact = _top(conn, names, backend.layout, vectors, dim, candidates, exact=True)
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        query, params = pg_sql.semantic_query(
            names, Filter(), vectors, TOP, backend.layout, dim, candidates
        )
        plan = "\n".join(r[0] for r in conn.execute(sql.SQL("EXPLAIN ") + query, params))
        if names.hnsw.as_string(conn).strip('"') not in plan:
            report.problems.append(f"{names.table}: the pgvector index is not used by a query")
        walked = _top(conn, names, backend.layout, vectors, dim, candidates, exact=False)
    recalls = [len(set(a) & set(e)) / len(e) for a, e in zip(walked, exact, strict=True) if e]
    return sum(recalls) / len(recalls) if recalls else 1.0


def _top(conn, names, layout, vectors, dim, candidates, exact: bool) -> list[list[str]]:
    query, params = pg_sql.semantic_query(
        names, Filter(), vectors, TOP, layout, dim, candidates, exact
    )
    out: list[list[str]] = [[] for _ in vectors]
    for row in conn.execute(query, params).fetchall():
        out[row[0] - 1].append(row[1])
    return out
