"""The phrase index: a GIN over each document's short words with their neighbours, so that a rare
phrase made of common words ("The ins and") is found without rechecking every chunk that holds
its trigrams.

A document's keys: for every space-delimited word of 1-32 characters that has a word before and
after it, the last two characters of the word before, the word, and the first two of the word
after ("he ins an"), and the same with one character ("e ins a"), each hashed to an int4. A
phrase's keys: for each inner word, the widest of these whose neighbouring characters lie inside
the phrase. Every document holding the phrase holds its keys
(an inner word is a whole word of the document), so the index is an exact prefilter: the
substring condition is still checked on every candidate, and a hash collision only adds one.

Both sides are computed by Postgres from the text the LIKE / ILIKE compares: the document (ILIKE:
lower(document)) and the pattern's literal (ILIKE: lower(pattern), as ILIKE lowers it), so no
case folding outside Postgres decides what is found. The trigram index stays the path for a
phrase without inner words and for one whose trigrams are rarer (compute.py routes by the
document sample); the phrase index is built after a first build, beside serving (CONCURRENTLY),
and a reader uses it only once it is valid.
"""

from __future__ import annotations

import logging
import time

import psycopg
from psycopg import sql

from candlefire_pipeline.backends.pg.health import flush_gin_pending
from candlefire_pipeline.backends.pg.sql import Names

log = logging.getLogger(__name__)

#: Longest word keyed (a longer one is keyed by none: a chemical name, a sequence).
MAX_WORD = 32
#: Characters of each neighbouring word in a key, widest first ("2|ng to th"): one character
#: made "n of a" a key of 12% of the documents; two make most keys of a title head rarer than
#: its trigrams, and one still keys a phrase whose first or last word is a single letter
#: ("A mutation in").
CONTEXTS = (2, 1)
#: Versioned: a changed key function gets a new name (and its indexes are rebuilt).
DOC_KEYS = "candlefire_phrase_keys_v1"
QUERY_KEYS = "candlefire_phrase_query_keys_v1"
_FUNCTIONS_LOCK = "candlefire:phrase-functions"


def _key(context: int, before: str, word: str, after: str) -> str:
    """SQL: one key of `word` between `before` and `after` with `context` characters of each."""
    return (
        f"'{context}|' || right({before}, {context}) || ' ' || {word} || ' ' || "
        f"left({after}, {context})"
    )


_DOC_VALUES = ", ".join(f"({_key(c, 's.b', 's.t', 's.a')})" for c in CONTEXTS)
_DOC_KEYS_SQL = f"""
CREATE OR REPLACE FUNCTION {DOC_KEYS}(d text) RETURNS int4[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT hashtext(k.k)), '{{}}') FROM (
    SELECT t, lag(t) OVER w AS b, lead(t) OVER w AS a
    FROM unnest(string_to_array(d, ' ')) WITH ORDINALITY AS u(t, i) WINDOW w AS (ORDER BY i)
  ) s CROSS JOIN LATERAL (VALUES {_DOC_VALUES}) k(k)
  WHERE length(s.t) BETWEEN 1 AND {MAX_WORD} AND k.k IS NOT NULL $$"""


def _known(context: int) -> str:
    """SQL: both neighbours of inner word a[i] known to `context` characters: each is itself
    inner (a whole word of the document, an empty one between two spaces included) or has that
    many characters inside the phrase."""
    return (
        f"(length(a[i - 1]) >= {context} OR i > 2)"
        f" AND (length(a[i + 1]) >= {context} OR i < cardinality(a) - 1)"
    )


_QUERY_CASES = " ".join(
    f"WHEN {_known(c)} THEN {_key(c, 'a[i - 1]', 'a[i]', 'a[i + 1]')}" for c in CONTEXTS
)
_QUERY_KEYS_SQL = f"""
CREATE OR REPLACE FUNCTION {QUERY_KEYS}(core text) RETURNS int4[]
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(DISTINCT hashtext(k)), '{{}}') FROM (
    SELECT CASE {_QUERY_CASES} END AS k
    FROM (SELECT string_to_array(core, ' ') AS a) x, generate_series(2, cardinality(a) - 1) i
    WHERE length(a[i]) BETWEEN 1 AND {MAX_WORD}
  ) s WHERE k IS NOT NULL $$"""


def searched_text(mode: str, column: sql.Composable) -> sql.Composed:
    """What the substring condition compares: the text, lower-cased for ILIKE."""
    return sql.SQL("lower({})" if mode == "ilike" else "{}").format(column)


def index_name(names: Names, mode: str) -> sql.Identifier:
    return names.ident("_phrase_ilike" if mode == "ilike" else "_phrase_like")


def all_index_names(names: Names) -> list[sql.Identifier]:
    return [index_name(names, mode) for mode in ("like", "ilike")]


def doc_keys(mode: str, alias: str = "c") -> sql.Composed:
    """The indexed expression (a query must name it exactly for the index to serve)."""
    column = sql.SQL("{}.document").format(sql.Identifier(alias)) if alias else sql.SQL("document")
    return sql.SQL("{f}({t})").format(f=sql.Identifier(DOC_KEYS), t=searched_text(mode, column))


def query_keys(mode: str, pattern: sql.Composable) -> sql.Composed:
    """The keys of a LIKE pattern '%literal%' (escaped with '\\'), from the literal the operator
    compares: the pattern lowered first for ILIKE, then its % dropped and its escapes undone."""
    lowered = searched_text(mode, pattern)
    core = sql.SQL("regexp_replace(substr({p}, 2, length({p}) - 2), '\\\\(.)', '\\1', 'g')").format(
        p=lowered
    )
    return sql.SQL("{f}({c})").format(f=sql.Identifier(QUERY_KEYS), c=core)


def ensure_functions(conn: psycopg.Connection) -> None:
    """Create the key functions once per database (a lock keeps two tables' first builds from
    racing on the catalog)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [_FUNCTIONS_LOCK])
        found = conn.execute(
            "SELECT to_regprocedure(%s) IS NOT NULL AND to_regprocedure(%s) IS NOT NULL",
            [f"{DOC_KEYS}(text)", f"{QUERY_KEYS}(text)"],
        ).fetchone()[0]
        if not found:
            conn.execute(_DOC_KEYS_SQL)
            conn.execute(_QUERY_KEYS_SQL)


def state(conn: psycopg.Connection, names: Names, mode: str) -> str:
    """'valid', 'invalid' (a failed concurrent build) or 'absent'."""
    row = conn.execute(
        "SELECT i.indisvalid AND i.indisready FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
        [index_name(names, mode).as_string(conn)],
    ).fetchone()
    if row is None:
        return "absent"
    return "valid" if row[0] else "invalid"


def build(conn: psycopg.Connection, names: Names, mode: str) -> float | None:
    """Build the index beside reads and writes (autocommit connection); seconds, or None when
    it was already valid or another session is building it. An invalid one (a build that
    failed midway) is dropped first."""
    key = f"candlefire:phrase:{names.table}"
    if not conn.execute("SELECT pg_try_advisory_lock(hashtext(%s))", [key]).fetchone()[0]:
        log.info("the phrase index of %s is being built by another session", names.table)
        return None
    try:
        return _build(conn, names, mode)
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [key])


def _build(conn: psycopg.Connection, names: Names, mode: str) -> float | None:
    found = state(conn, names, mode)
    if found == "valid":
        return None
    index = index_name(names, mode)
    label = index.as_string(conn)
    if found == "invalid":
        log.warning("%s is invalid (a build failed midway); building it again", label)
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(index))
    ensure_functions(conn)
    started = time.perf_counter()
    log.info("building the phrase index %s (reads and writes go on)", label)
    conn.execute(
        sql.SQL("CREATE INDEX CONCURRENTLY IF NOT EXISTS {i} ON {t} USING gin ({k})").format(
            i=index, t=names.ident(), k=doc_keys(mode, alias="")
        )
    )
    # ANALYZE would compute every sampled row's keys for statistics no plan here uses
    conn.execute(sql.SQL("ALTER INDEX {} ALTER COLUMN 1 SET STATISTICS 0").format(index))
    seconds = time.perf_counter() - started
    log.info("phrase index %s built in %.1f s", label, seconds)
    return seconds


def flush_pending(conn: psycopg.Connection, names: Names, mode: str) -> None:
    """Merge the index's GIN pending list after a write, as for the trigram index."""
    if state(conn, names, mode) == "valid":
        flush_gin_pending(conn, index_name(names, mode).as_string(conn))


def python_query_keys(core: str) -> list[str]:
    """The phrase's keys as text (QUERY_KEYS before hashing), for routing estimates only."""
    words = core.split(" ")
    keys = []
    for i in range(1, len(words) - 1):
        before, word, after = words[i - 1], words[i], words[i + 1]
        if not 1 <= len(word) <= MAX_WORD:
            continue
        for context in CONTEXTS:
            if (len(before) >= context or i > 1) and (len(after) >= context or i < len(words) - 2):
                keys.append(f"{context}|{before[-context:]} {word} {after[:context]}")
                break
    return keys


def key_text(key: str) -> str:
    """The text a key stands for in a document ("ng to th" of "2|ng to th")."""
    return key.partition("|")[2]
