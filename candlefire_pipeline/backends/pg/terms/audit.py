"""Checking kept entries against a fresh computation: the proof that the cache is exact.

Every entry computed exactly (a keyword variant's holders ranked, an entity name's nearest
chunks on a table searched without a graph walk) must equal the same query run now, member for
member and distance for distance; every entry's grounding facts must equal a fresh LIKE (its
first abstract holder the first in insertion order that holds the variant now). An
entry made by an HNSW walk has no exact twin: its members are checked instead (each still
exists, still holds the variant, at the distance kept) and its recall against the exact list
is reported.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.base import Filter
from candlefire_pipeline.backends.common import like_pattern
from candlefire_pipeline.backends.pg import sql as pg_sql
from candlefire_pipeline.backends.pg.terms import schema
from candlefire_pipeline.backends.pg.terms.matching import as_array

#: Rows asked for a complete list's fresh computation: every candidate.
EVERY = 1_000_000_000
_COLUMNS = (
    "id", "kind", "recipe", "text", "vector", "listed", "ids", "distances", "complete",
    "approximate", "witness", "witness_known", "abstract_witness", "abstract_known",
    "abstract_first",
)  # fmt: skip


@dataclass
class AuditReport:
    checked: int = 0
    differences: list[str] = field(default_factory=list)
    #: recall of walked lists against their exact twin (mean), and how many were walked
    walked: int = 0
    walked_recall: float = 1.0

    @property
    def exact(self) -> bool:
        return not self.differences


def entries(conn: psycopg.Connection, names, sample: int | None = None, seed: int = 0) -> list:
    """Kept entries as dicts (all, or `sample` of them at random)."""
    query = sql.SQL("SELECT {c} FROM {e} ORDER BY id").format(
        c=sql.SQL(", ").join(map(sql.Identifier, _COLUMNS)), e=schema.terms_table(names)
    )
    rows = [dict(zip(_COLUMNS, row, strict=True)) for row in conn.execute(query).fetchall()]
    if sample is not None and sample < len(rows):
        rows = random.Random(seed).sample(rows, sample)
    return rows


def audit(store, sample: int | None = None, seed: int = 0) -> AuditReport:
    """Compare kept entries of a pgvector store with fresh computations."""
    report = AuditReport()
    if not schema.exists(store.conn, store.names):
        return report
    recalls = []
    for entry in entries(store.conn, store.names, sample, seed):
        report.checked += 1
        label = f"{entry['kind']} {entry['text']!r}"
        if entry["listed"]:
            ids, distances = fresh_list(store, entry)
            kept = (list(entry["ids"]), list(entry["distances"]))
            if entry["approximate"]:
                recalls.append(len(set(kept[0]) & set(ids)) / len(ids) if ids else 1.0)
                report.differences += _members(store, entry, label)
            elif (ids, distances) != kept:
                report.differences.append(f"{label}: kept {kept[0]} != fresh {ids}")
        if entry["kind"] == "keyword":
            report.differences += _grounding(store, entry, label) + _first(store, entry, label)
    report.walked = len(recalls)
    report.walked_recall = sum(recalls) / len(recalls) if recalls else 1.0
    return report


def fresh_list(store, entry: dict) -> tuple[list[str], list[float]]:
    """The entry's list computed now, exactly, as long as the kept one (all, when complete)."""
    n = EVERY if entry["complete"] else max(len(entry["ids"]), 1)
    vector = as_array(entry["vector"])
    if entry["kind"] == "keyword":
        query, params = pg_sql.substring_query(
            store.names, [entry["text"]], _mode(entry), Filter(), [vector], n, store.layout
        )
    else:
        query, params = pg_sql.semantic_query(
            store.names, Filter(), [vector], n, store.layout, len(vector), n, exact=True
        )
    rows = store.conn.execute(query, params).fetchall()
    if not entry["complete"]:
        rows = rows[: len(entry["ids"])]
    return [r[1] for r in rows], [r[-1] for r in rows]


def _mode(entry: dict) -> str:
    return entry["recipe"].split(";")[0]


def _members(store, entry: dict, label: str) -> list[str]:
    """A walked list's members exist, hold the variant and sit at the distance kept."""
    query = sql.SQL(
        "SELECT c.chunk_id, c.embedding <=> %s, c.document {op} %s ESCAPE '\\' FROM {t} c "
        "WHERE c.chunk_id = ANY(%s)"
    ).format(t=store.names.ident(), op=sql.SQL("ILIKE" if _mode(entry) == "ilike" else "LIKE"))
    pattern = like_pattern(entry["text"]) if entry["kind"] == "keyword" else "%"
    found = {r[0]: r[1:] for r in store.conn.execute(
        query, [as_array(entry["vector"]), pattern, list(entry["ids"])]).fetchall()}  # fmt: skip
    out = []
    for chunk_id, distance in zip(entry["ids"], entry["distances"], strict=True):
        if chunk_id not in found:
            out.append(f"{label}: member {chunk_id} no longer exists")
        elif found[chunk_id][0] != distance or not found[chunk_id][1]:
            out.append(f"{label}: member {chunk_id} changed since it was kept")
    return out


def _grounding(store, entry: dict, label: str) -> list[str]:
    out = []
    for field_name, known, where in (
        ("witness", "witness_known", Filter()),
        ("abstract_witness", "abstract_known", Filter(abstract_only=True)),
    ):
        if not entry[known]:
            continue
        query, params = pg_sql.contains_query(store.names, [entry["text"]], _mode(entry), where)
        held = bool(store.conn.execute(query, params).fetchone()[0])
        if held != (entry[field_name] is not None):
            out.append(f"{label}: {field_name} {entry[field_name]!r} but a fresh LIKE says {held}")
    return out


def _first(store, entry: dict, label: str) -> list[str]:
    """A kept first abstract holder is the first abstract in insertion order holding the text."""
    if entry["abstract_first"] is None:
        return []
    query = sql.SQL(
        "SELECT c.chunk_id FROM {t} c WHERE c.chunk_index = 0 AND c.document {op} %s "
        "ESCAPE '\\' ORDER BY c.seq LIMIT 1"
    ).format(t=store.names.ident(), op=sql.SQL("ILIKE" if _mode(entry) == "ilike" else "LIKE"))
    found = store.conn.execute(query, [like_pattern(entry["text"])]).fetchone()
    first = found[0] if found else None
    if first != entry["abstract_first"]:
        return [f"{label}: abstract_first {entry['abstract_first']!r} but fresh first is {first!r}"]
    return []
