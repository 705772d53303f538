"""The word index: a GIN over each document's words, the prefilter of a phrase whose trigrams
are common.

The trigram index finds a phrase by the chunks holding all of its trigrams. For a rare phrase
of common words ("The essence of") that is tens of thousands of chunks at 1M, each read and
rechecked (~360 ms): the cost grows with the table although few chunks hold the phrase. A word
bounded on both sides inside the phrase ("essence") is a whole word of every document holding
the phrase, so the documents holding all such inner words are a superset of its holders, found
by the rare word's posting list.

Exact by construction, for case-sensitive LIKE: a document's words are its maximal runs of
ASCII letters, lower-cased (a non-ASCII letter separates words on both sides, so a pattern and
a document split alike). Words shorter than MIN_LENGTH (common, little to filter) or longer than
MAX_LENGTH (a GIN key has a size limit) are not indexed and never asked for. ILIKE folds case by
the database's locale, where a non-ASCII letter may fold to an ASCII one: that mode keeps the
trigram path alone.
"""

from __future__ import annotations

import logging
import re
import time

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.sql import Names

log = logging.getLogger(__name__)

#: The function's name carries its version: an index built on one definition is only right for
#: that definition, so a changed definition must be a new function (and a new index).
FUNCTION = "candlefire_words_v1"
MIN_LENGTH, MAX_LENGTH = 4, 64
_RUNS = re.compile(r"[A-Za-z]+")


def function_statement() -> sql.Composed:
    """The words of a document, as the index keeps them (IMMUTABLE: an index may call it)."""
    return sql.SQL(
        "CREATE OR REPLACE FUNCTION {f}(document text) RETURNS text[] "
        "LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ "
        "SELECT coalesce(array_agg(DISTINCT w), '{{}}') "
        """FROM regexp_split_to_table(lower(document COLLATE "C"), '[^a-z]+') AS w """
        "WHERE length(w) BETWEEN {lo} AND {hi} $$"
    ).format(f=sql.Identifier(FUNCTION), lo=sql.Literal(MIN_LENGTH), hi=sql.Literal(MAX_LENGTH))


def ensure_function(conn: psycopg.Connection) -> None:
    """Create the function once per database (inside the caller's transaction); concurrent
    writers of different tables serialize on one lock instead of racing the catalog."""
    query = "SELECT to_regprocedure(%s) IS NULL"
    signature = f"{FUNCTION}(text)"
    if not conn.execute(query, [signature]).fetchone()[0]:
        return
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('candlefire:words_function'))")
    if conn.execute(query, [signature]).fetchone()[0]:
        conn.execute(function_statement())


def index_statement(names: Names) -> sql.Composed:
    return sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} USING gin ({f}(document))").format(
        i=names.words, t=names.ident(), f=sql.Identifier(FUNCTION)
    )


def add_index(conn: psycopg.Connection, names: Names) -> None:
    """A table built before the word index gets it, in the writer's transaction (reads go on
    meanwhile; every document is read once)."""
    started = time.perf_counter()
    log.info("building the word index of %s", names.table)
    conn.execute(index_statement(names))
    log.info("built the word index of %s in %.1f s", names.table, time.perf_counter() - started)


def has_index(conn: psycopg.Connection, names: Names) -> bool:
    name = names.words.as_string(conn)
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", [name]).fetchone()[0]


def words_call(alias: str = "c") -> sql.Composed:
    """The indexed expression, as a query must spell it for the planner to use the index."""
    return sql.SQL("{f}({a}.document)").format(f=sql.Identifier(FUNCTION), a=sql.Identifier(alias))


def document_words(document: str) -> set[str]:
    """What the SQL function returns for a document."""
    return {w.lower() for w in _RUNS.findall(document) if MIN_LENGTH <= len(w) <= MAX_LENGTH}


def inner_words(text: str) -> list[str]:
    """The words every document holding `text` holds whole: runs of ASCII letters bounded on
    both sides inside the text (the first and last run may continue in a document)."""
    found = {
        m.group().lower()
        for m in _RUNS.finditer(text)
        if m.start() > 0 and m.end() < len(text) and MIN_LENGTH <= len(m.group()) <= MAX_LENGTH
    }
    return sorted(found)
