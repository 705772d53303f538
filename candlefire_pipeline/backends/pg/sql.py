"""SQL for the pgvector store: its identifiers (Names) and the read queries (the table's own
statements are backends/pg/ddl.py); identifiers via psycopg.sql, every value a bound parameter."""

from __future__ import annotations

import re
from dataclasses import dataclass

from psycopg import sql

from candlefire_pipeline.backends.base import RESULT_FIELDS, Filter
from candlefire_pipeline.backends.common import like_pattern
from candlefire_pipeline.backends.pg.layout import PLAIN, Layout

#: Lower-case identifier short enough that every derived index name stays under 63 bytes.
TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,39}$")

#: Selected columns of a result row; similarity is computed (or NULL) after them.
RESULT_COLUMNS = tuple(f for f in RESULT_FIELDS if f != "similarity")
#: Insertion order of the rows, as Chroma keeps it (backends/pg/insertion_order.py).
SEQ_COLUMN = "seq"


class _Suffixed:
    """The identifier of the table's name with a suffix (its meta table, an index), as an
    attribute of Names."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def __get__(self, names, owner=None):
        return self if names is None else names.ident(self.suffix)


@dataclass(frozen=True)
class Names:
    """Every identifier derived from the table name, validated once."""

    table: str

    def __post_init__(self) -> None:
        if not TABLE_NAME.match(self.table):
            raise ValueError(
                f"table name must match {TABLE_NAME.pattern} (lower-case, at most 40 chars), "
                f"got {self.table!r}"
            )

    def ident(self, suffix: str = "") -> sql.Identifier:
        return sql.Identifier(self.table + suffix)

    meta = _Suffixed("_meta")
    pkey = _Suffixed("_pkey")
    btree = _Suffixed("_pmid_chunk")
    hnsw = _Suffixed("_embedding_hnsw")
    trgm = _Suffixed("_document_trgm")
    seq_order = _Suffixed("_seq")

    @property
    def lock_key(self) -> str:
        return f"candlefire:{self.table}"


def where_clause(where: Filter, alias: str = "c") -> tuple[list[sql.Composable], list]:
    """Conditions and their parameters for a Filter (alias-qualified)."""
    col = _qualifier(alias)
    conds: list[sql.Composable] = []
    params: list = []
    if where.pmids is not None:
        conds.append(sql.SQL("{} = ANY(%s)").format(col("pmid")))
        params.append(list(where.pmids))
    if where.abstract_only:
        conds.append(sql.SQL("{} = 0").format(col("chunk_index")))
    if where.min_year is not None:
        conds.append(sql.SQL("{} >= %s").format(col("year")))
        params.append(int(where.min_year))
    if where.max_year is not None:
        conds.append(sql.SQL("{} <= %s").format(col("year")))
        params.append(int(where.max_year))
    if where.has_full_text is not None:
        conds.append(sql.SQL("{} = %s").format(col("has_full_text")))
        params.append(bool(where.has_full_text))
    return conds, params


def substring_clause(variants: list[str], mode: str, alias: str = "c") -> tuple[sql.Composed, list]:
    r"""(document LIKE %s ESCAPE '\' OR ...) for each variant, patterns as parameters."""
    operator = sql.SQL("ILIKE" if mode == "ilike" else "LIKE")
    one = sql.SQL("{} {} %s ESCAPE '\\'").format(_qualifier(alias)("document"), operator)
    clause = sql.SQL("(") + sql.SQL(" OR ").join([one] * len(variants)) + sql.SQL(")")
    return clause, [like_pattern(v) for v in variants]


def _qualifier(alias: str):
    return lambda column: sql.Identifier(alias, column)


def _conjunction(conds: list[sql.Composable]) -> sql.Composable:
    return sql.SQL(" AND ").join(conds) if conds else sql.SQL("true")


def result_columns(alias: str = "c") -> sql.Composed:
    return sql.SQL(", ").join(sql.Identifier(alias, c) for c in RESULT_COLUMNS)


def nearest_rows(
    names: Names,
    cond: sql.Composable,
    n: int,
    layout: Layout,
    dim: int,
    candidates: int,
    exact: bool,
    inner_cols: sql.Composable,
    tiebreak: sql.Composable | None = None,
) -> tuple[sql.Composed, list]:
    """The top n rows of table alias `c` nearest to `q.vec` (the LATERAL body of a batch of
    query vectors) with their `distance`, and its LIMIT parameters.

    With a compressed index (half precision, binary quantization) the HNSW walk orders by the
    index's distance for `candidates` rows, which are then re-ranked by exact cosine distance on
    the stored float32 vectors. `exact` orders every row by its cosine distance instead (an
    expression the HNSW index does not match, so no graph walk); `tiebreak` orders equal
    distances there and in the re-rank (a graph walk's order is the index's).
    """
    query_vec = sql.SQL("q.vec")
    embedding = sql.SQL("c.embedding")
    tie = sql.SQL("") if tiebreak is None else sql.SQL(", ") + tiebreak
    if exact:
        nearest = sql.SQL(
            "SELECT {inner_cols}, c.embedding <=> {q} AS distance "
            "FROM {t} c WHERE {cond} ORDER BY (c.embedding <=> {q}) + 0{tie} LIMIT %s"
        )
        limits = [n]
    elif layout.reranked:
        nearest = sql.SQL(
            """SELECT {inner_cols}, c.embedding <=> {q} AS distance FROM (
                SELECT * FROM {t} c WHERE {cond} ORDER BY {ann} LIMIT %s
            ) c ORDER BY distance{tie} LIMIT %s"""
        )
        limits = [candidates, n]
    else:
        nearest = sql.SQL(
            "SELECT {inner_cols}, c.embedding <=> {q} AS distance "
            "FROM {t} c WHERE {cond} ORDER BY {ann} LIMIT %s"
        )
        limits = [n]
    body = nearest.format(
        inner_cols=inner_cols,
        q=query_vec,
        t=names.ident(),
        cond=cond,
        ann=layout.ann_distance(embedding, query_vec, dim),
        tie=tie,
    )
    return body, limits


def semantic_query(
    names: Names,
    where: Filter,
    vectors: list,
    n: int,
    layout: Layout,
    dim: int,
    candidates: int,
    exact: bool = False,
    patterns: tuple[list[str], str] | None = None,
) -> tuple[sql.Composed, list]:
    """Top-n per query vector in one statement: unnest the vectors, LATERAL ANN per vector
    (nearest_rows).

    Rows are (ord, result columns..., similarity, distance). `patterns` = (one LIKE pattern per
    vector, the substring mode): each walk keeps only the chunks holding its own pattern (the
    keyword stage's walk for a variant held by many chunks). Equal distances are ordered by id
    wherever the order is the query's own (an exact scan, a re-rank): the same rows on every
    call, which the term cache's upkeep relies on. The vectors go as a binary parameter (%b):
    pgvector-python's text form formats every float in Python (2.5 ms per 384-dim vector at
    load 13 here), which was most of the 12-name fan-out's client time.
    """
    conds, params = where_clause(where)
    source = sql.SQL("unnest(%b::vector[]) WITH ORDINALITY AS q(vec, ord)")
    inputs: list = [vectors]
    if patterns is not None:
        operator = sql.SQL("ILIKE" if patterns[1] == "ilike" else "LIKE")
        conds = [*conds, sql.SQL("c.document {} q.pattern ESCAPE '\\'").format(operator)]
        source = sql.SQL("unnest(%b::vector[], %s::text[]) WITH ORDINALITY AS q(vec, pattern, ord)")
        inputs.append([like_pattern(v) for v in patterns[0]])
    nearest, limits = nearest_rows(
        names, _conjunction(conds), n, layout, dim, candidates, exact, result_columns(),
        tiebreak=sql.SQL('c.chunk_id COLLATE "C"'),
    )  # fmt: skip
    query = sql.SQL(
        """SELECT q.ord, {cols}, 1 - c.distance AS similarity, c.distance
        FROM {source}
        CROSS JOIN LATERAL ({nearest}) c
        ORDER BY q.ord, c.distance, c.chunk_id COLLATE "C"
        """
    ).format(source=source, cols=result_columns(), nearest=nearest)
    return query, [*inputs, *params, *limits]


def substring_query(
    names: Names,
    variants: list[str],
    mode: str,
    where: Filter,
    vectors: list,
    n: int,
    layout: Layout = PLAIN,
) -> tuple[sql.Composed, list]:
    """Per variant: every chunk holding it (trigram index), sorted by cosine distance to that
    variant's own vector, the first n; all variants in one statement, `ord` numbering them.
    Rows are (ord, result columns..., similarity, distance).

    Exact. Each variant's filter is a MATERIALIZED CTE, which keeps the planner from walking the
    HNSW index with the LIKE as a post-filter (approximate, and for a rare term a scan of up to
    hnsw.max_scan_tuples rows).
    """
    conds, filter_params = where_clause(where)
    operator = sql.SQL("ILIKE" if mode == "ilike" else "LIKE")
    ctes, branches, params, limits = [], [], [], []
    for ordinal, (variant, vector) in enumerate(zip(variants, vectors, strict=True)):
        hits = sql.Identifier(f"h{ordinal}")
        ctes.append(
            sql.SQL(
                "{h} AS MATERIALIZED (SELECT c.chunk_id, c.embedding <=> {q} AS distance "
                "FROM {t} c WHERE c.document {op} %s ESCAPE '\\' AND {cond})"
            ).format(
                h=hits,
                q=sql.SQL("%b::vector"),
                t=names.ident(),
                op=operator,
                cond=_conjunction(conds),
            )
        )
        params += [vector, like_pattern(variant), *filter_params]
        branches.append(
            sql.SQL(
                "(SELECT {o} AS ord, chunk_id, distance FROM {h} ORDER BY distance, "
                'chunk_id COLLATE "C" LIMIT %s)'
            ).format(o=sql.Literal(ordinal), h=hits)
        )
        limits.append(n)
    query = sql.SQL(
        """WITH {ctes}
        SELECT best.ord, {cols}, 1 - best.distance AS similarity, best.distance
        FROM ({branches}) best JOIN {t} c ON c.chunk_id = best.chunk_id
        ORDER BY best.ord, best.distance, c.chunk_id COLLATE "C"
        """
    ).format(
        ctes=sql.SQL(", ").join(ctes),
        branches=sql.SQL(" UNION ALL ").join(branches),
        t=names.ident(),
        cols=result_columns(),
    )
    return query, params + limits


def contains_query(names: Names, variants: list[str], mode: str, where: Filter):
    """Whether any chunk holds a variant, through the trigram index.

    A bare EXISTS invites a sequential scan that hopes to stop early: for an absent term it reads
    the whole table (~340 ms at 62k chunks). MATERIALIZED plans the filter alone, as a bitmap
    scan of the trigram index: 0.9 ms absent, ~11 ms for a word in every chunk (measured).
    """
    like, like_params = substring_clause(variants, mode)
    conds, params = where_clause(where)
    query = sql.SQL(
        "WITH hits AS MATERIALIZED (SELECT 1 FROM {t} c WHERE {like} AND {cond}) "
        "SELECT EXISTS (SELECT 1 FROM hits)"
    ).format(t=names.ident(), like=like, cond=_conjunction(conds))
    return query, like_params + params


def fetch_query(names: Names, where: Filter) -> tuple[sql.Composed, list]:
    conds, params = where_clause(where)
    query = sql.SQL(
        "SELECT {cols}, NULL::float8 AS similarity FROM {t} c WHERE {cond} "
        'ORDER BY c.pmid COLLATE "C", c.chunk_index, c.chunk_id COLLATE "C"'
    ).format(cols=result_columns(), t=names.ident(), cond=_conjunction(conds))
    return query, params
