"""The pgvector table's insertion order follows the Chroma store's through every write: a replace
keeps a chunk id's place, new ids go to the end, a delete then a later add moves a row to the end;
a table from before the column gets it on the next write."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from candlefire_pipeline.backends.pg import insertion_order
from candlefire_pipeline.backends.pg.copy import COPY_COLUMNS
from candlefire_pipeline_tests.fixtures_backends import chunk, make_rows, unit_vectors

DIM = 8


def pg_order(store) -> list[str]:
    query = sql.SQL("SELECT chunk_id FROM {t} ORDER BY seq").format(t=store.names.ident())
    return [row[0] for row in store.conn.execute(query).fetchall()]


def chroma_order(store) -> list[str]:
    return store._collection.get(include=[])["ids"]


def paper(pmid: str, sections: int, seed: int, **fields) -> list[dict]:
    """A paper's chunks: a bare abstract chunk, or `sections` full-text chunks."""
    if sections == 0:
        return [chunk(pmid, **fields)]
    return [
        chunk(pmid, i, has_full_text=True, document=f"v{seed} {pmid} {i}", **fields)
        for i in range(sections)
    ]


def rows_of(chunks: list[dict], seed: int):
    return make_rows(chunks, unit_vectors(len(chunks), DIM, seed=seed))


#: (operation, argument) sequences applied to both stores: a replace of papers or a delete.
WRITES = [
    ("replace", [*paper("1", 3, 0), *paper("2", 0, 0), *paper("3", 2, 0), *paper("4", 0, 0)]),
    # paper 1 keeps s0..s2 and gains s3, s4; paper 3 loses s1; paper 2 gets full text (new ids)
    ("replace", [*paper("3", 1, 1), *paper("1", 5, 1), *paper("2", 2, 1)]),
    ("delete", ["4"]),
    ("replace", [*paper("5", 0, 2), *paper("4", 0, 2)]),  # 4 comes back: at the end
    ("replace", [*paper("1", 2, 3)]),  # replace again: s0, s1 keep their places
]


@pytest.mark.parametrize("bulk_rows", [1, 10_000], ids=["bulk-first-load", "incremental"])
def test_every_write_leaves_pgvector_in_chromas_order(make_backend, bulk_rows):
    pg = make_backend("pgvector", bulk_rebuild_rows=bulk_rows)
    chroma = make_backend("chroma")
    for step, (operation, argument) in enumerate(WRITES):
        for store in (pg, chroma):
            if operation == "replace":
                store.replace_papers(rows_of(argument, step))
            else:
                store.delete_papers(argument)
        assert pg_order(pg) == chroma_order(chroma), f"after write {step}"
    assert pg_order(pg) == ["1_s0", "1_s1", "3_s0", "2_s0", "2_s1", "5", "4"]


def test_a_failed_replace_keeps_the_order_and_the_next_one_works(make_backend):
    store = make_backend("pgvector")
    store.replace_papers(rows_of([*paper("1", 2, 0), *paper("2", 0, 0)], 0))
    before = pg_order(store)
    # Postgres text cannot hold NUL: the COPY fails after the DELETE (and its carry) ran
    bad = [*paper("1", 2, 1)]
    bad[1]["document"] = "bad \x00 byte"
    with pytest.raises(psycopg.Error):
        store.replace_papers(rows_of(bad, 1))
    assert pg_order(store) == before
    store.replace_papers(rows_of([*paper("1", 3, 2)], 2))  # same session, after the rollback
    assert pg_order(store) == ["1_s0", "1_s1", "2", "1_s2"]


def test_two_tables_in_one_transaction_keep_their_own_places(make_backend, pg_dsn):
    first, second = make_backend("pgvector"), make_backend("pgvector")
    first.replace_papers(rows_of([*paper("1", 0, 0), *paper("2", 0, 0)], 0))
    second.replace_papers(rows_of([*paper("8", 0, 0), *paper("9", 0, 0), *paper("1", 0, 0)], 0))
    columns = sql.SQL(", ").join(sql.Identifier(c) for c in COPY_COLUMNS)
    a, b = first.names.ident(), second.names.ident()
    with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(
            sql.SQL("CREATE TEMP TABLE kept AS SELECT * FROM {a} WHERE pmid = '1'").format(a=a)
        )
        for table in (b, a):  # both carry chunk id "1", with different places
            conn.execute(sql.SQL("DELETE FROM {t} WHERE pmid = '1'").format(t=table))
        conn.execute(sql.SQL("INSERT INTO {a} ({c}) SELECT {c} FROM kept").format(a=a, c=columns))
    assert pg_order(first) == ["1", "2"]  # its own place back, not the other table's
    assert pg_order(second) == ["8", "9"]


def drop_insertion_order(store) -> None:
    """The table as it was before the column and its triggers."""
    t = store.names.ident()
    with store.conn.transaction():
        for trigger in insertion_order.TRIGGERS:
            store.conn.execute(
                sql.SQL("DROP TRIGGER {g} ON {t}").format(g=sql.Identifier(trigger), t=t)
            )
        store.conn.execute(sql.SQL("ALTER TABLE {t} DROP COLUMN seq").format(t=t))


def test_a_table_from_before_gets_the_column_on_the_next_write(make_backend):
    store = make_backend("pgvector")
    store.replace_papers(rows_of([*paper("1", 2, 0), *paper("2", 0, 0), *paper("3", 0, 0)], 0))
    drop_insertion_order(store)
    assert not insertion_order.has_insertion_order(store.conn, store.names)
    assert not insertion_order.has_seq_index(store.conn, store.names)  # gone with its column
    store.replace_papers(rows_of([*paper("2", 0, 1), *paper("4", 0, 1)], 1))
    assert insertion_order.has_insertion_order(store.conn, store.names)
    assert insertion_order.has_seq_index(store.conn, store.names)
    # the existing rows are numbered (physical order) before the replace runs: 2 keeps its place
    assert pg_order(store) == ["1_s0", "1_s1", "2", "3", "4"]
    assert store.count() == 5
    invalid = store.conn.execute(
        "SELECT count(*) FROM pg_index WHERE indrelid = to_regclass(%s) AND NOT indisvalid",
        [store.names.table],
    ).fetchone()[0]
    assert invalid == 0
    store.replace_papers(rows_of([*paper("1", 2, 2)], 2))  # triggers are back too
    assert pg_order(store)[:2] == ["1_s0", "1_s1"]


def test_a_table_without_the_seq_index_gets_it_on_the_next_write(make_backend):
    store = make_backend("pgvector")
    store.replace_papers(rows_of([*paper("1", 0, 0)], 0))
    store.conn.execute(sql.SQL("DROP INDEX {i}").format(i=store.names.seq_order))
    assert not insertion_order.has_seq_index(store.conn, store.names)
    store.replace_papers(rows_of([*paper("2", 0, 0)], 0))
    assert insertion_order.has_seq_index(store.conn, store.names)
    with store.conn.transaction():  # two rows: only a plan without a table scan shows it
        store.conn.execute("SET LOCAL enable_seqscan = off")
        plan = store.conn.execute(
            sql.SQL("EXPLAIN SELECT chunk_id FROM {t} ORDER BY seq LIMIT 1").format(
                t=store.names.ident()
            )
        ).fetchall()
    assert store.names.table + "_seq" in " ".join(row[0] for row in plan)


def test_ensure_is_idempotent_and_cheap_once_done(make_backend):
    store = make_backend("pgvector")
    store.replace_papers(rows_of([*paper("1", 0, 0)], 0))
    with store.conn.transaction():
        insertion_order.ensure_insertion_order(store.conn, store.names)
        insertion_order.ensure_insertion_order(store.conn, store.names)
    triggers = store.conn.execute(
        "SELECT count(*) FROM pg_trigger WHERE tgrelid = to_regclass(%s) AND NOT tgisinternal"
        " AND tgname = ANY(%s)",
        [store.names.table, list(insertion_order.TRIGGERS)],
    ).fetchone()[0]
    assert triggers == len(insertion_order.TRIGGERS)
