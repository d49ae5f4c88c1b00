"""What both ways of sending a search's statements share (``notebook.sql.search``, the fast
path, and ``notebook.orm``, the plain ORM): how a query narrows the candidates, which
columns a search reads, and SQLite's trigram match (migrations 0002 and 0007)."""

from typing import Any

# How a query narrows a statement's candidates (``Shape.query``): each gives the entries
# whose title, content or tags' joined text holds the normalized query, which are exactly the
# matches unless the query holds the tags' separator (it may then span two tags, and
# ``selectors._matches`` narrows them; ``selectors._narrowed_exactly``).
LIKE = "like"  # a substring test of each searched column, row by row along the walk (INSTR; PostgreSQL: STRPOS)
TRIGRAM = "trigram"  # by the trigram index: SQLite's FTS5 table; PostgreSQL's GIN index of codex trigram keys

# The entry's own list that a tag or related-agent filter tests when ``tested_on_the_row``
# (the index tables ``EntryTag`` and ``EntryRelatedAgent`` copy these lists).
ON_THE_ROW = {"tag": "tags", "agent": "related_agent_ids"}


def tested_on_the_row(vendor: str, prefilter: str | None) -> bool:
    """Whether a statement tests its tag and related agent on each candidate's own row
    (``tags @> '["t"]'``) instead of joining their index tables: PostgreSQL's trigram step.

    The step is taken for a word that the sample found rare in the codex, so its matches are
    few; the planner, which judges the word by the whole table (where it may be common) and
    may use no index scan in this step, would otherwise build a hash of every index row of a
    common tag to meet them. On the row, the tag costs one test per match, and no plan is
    left to choose but the trigram bitmap. (SQLite's step looks up each FTS5 match already.)
    """
    return vendor == "postgresql" and prefilter == TRIGRAM


# PostgreSQL's trigram step runs with these planner settings, for its one statement: no index
# scan (the id-order walk, which the planner, judging a word by the whole table, would pick
# for a word common in other codexes but rare in this one), no sequential scan and no
# parallel workers (their start-up costs more than a few matches), leaving a bitmap scan of
# the codex trigram keys' index (``selectors._indexed_candidates``). And no JIT compilation:
# judged by the whole table, a word common elsewhere is a sort of hundreds of thousands of
# rows, whose cost passes ``jit_above_cost`` on a large server, and compiling the statement's
# expressions takes milliseconds where the few matches it sorts take a fraction of one.
PG_BITMAP_ONLY = {
    "enable_indexscan": "off",
    "enable_seqscan": "off",
    "max_parallel_workers_per_gather": "0",
    "jit": "off",
}
# The settings made local to the transaction, as ``SET LOCAL`` makes them.
PG_BITMAP_ONLY_SET = "SELECT " + ", ".join(
    f"set_config('{name}', '{value}', true)" for name, value in PG_BITMAP_ONLY.items()
)
# Run before ``PG_BITMAP_ONLY_SET`` and after the statement, in the same transaction: the old
# values kept in placeholder settings of the transaction, and put back. ``set_config(...,
# true)`` lasts to the end of the transaction, and a caller's may go on after the statement.
PG_BITMAP_ONLY_SAVE = "SELECT " + ", ".join(
    f"set_config('notebook.saved_{name}', current_setting('{name}'), true)" for name in PG_BITMAP_ONLY
)
PG_BITMAP_ONLY_RESTORE = "SELECT " + ", ".join(
    f"set_config('{name}', current_setting('notebook.saved_{name}'), true)" for name in PG_BITMAP_ONLY
)

# PostgreSQL's trigram step: the entry's codex-qualified trigram keys (migration 0009's
# index, the expression exactly as it is indexed, its keys compared bytewise) hold all of
# the query's, which any entry of the codex whose title, content or tags' text holds the
# query has. Its parameters: the codex id, then the normalized query. A prefilter like the
# others: the statement still tests each column for the substring.
PG_TRIGRAM_KEYS = (
    "notebook_entry_trigram_keys({table}.codex_id, {table}.search_title, {table}.search_content,"
    ' {table}.search_tags_text) COLLATE "C" @> notebook_query_trigram_keys((%s)::bigint, %s)'
)

# SQLite: the ids of entries that hold a normalized query, by the FTS5 trigram table
# (migration 0002), whose row matches the query as a phrase, and among the codex's entries of
# the fewer than 32 still waiting for their batch (migration 0007), by INSTR. (The FTS5 table
# is one for every codex; the statement around this keeps the codex's ids.) The waiting
# entries are named by their codex, as every read of a notebook table names it
# (docs/capacity.md); the unary ``+`` keeps that a test of the few waiting rows, never a walk
# of the codex's index. Its parameters: ``sqlite_trigram_params``.
SQLITE_TRIGRAM_MATCH = (
    "SELECT k.entry_id FROM notebook_entry_trigram_key k WHERE k.rowid IN "
    "(SELECT rowid FROM notebook_entry_trigram WHERE notebook_entry_trigram MATCH %s)"
    " UNION ALL "
    "SELECT k.entry_id FROM notebook_entry_trigram_key k INNER JOIN notebook_entry e ON e.id = k.entry_id"
    " WHERE k.rowid > (SELECT indexed FROM notebook_entry_trigram_state) AND +e.codex_id = %s"
    " AND (INSTR(e.search_title, %s) > 0 OR INSTR(e.search_content, %s) > 0 OR INSTR(e.search_tags_text, %s) > 0)"
)
# The same, only ids after a cursor (the last parameter of each half). The bound is here,
# not on the entry table's id: there SQLite would walk the codex's (codex, id) index from the
# cursor to its end, testing each id against the matches, and a page would cost what the
# rest of the codex holds; here it looks up each match instead. The unary ``+`` keeps each
# bound a test of the rows found (by FTS5 rowid; among the waiting ones), never an index
# range of the key or entry table, which would walk every id after the cursor.
SQLITE_TRIGRAM_MATCH_AFTER = (
    "SELECT k.entry_id FROM notebook_entry_trigram_key k WHERE k.rowid IN "
    "(SELECT rowid FROM notebook_entry_trigram WHERE notebook_entry_trigram MATCH %s) AND +k.entry_id > %s"
    " UNION ALL "
    "SELECT k.entry_id FROM notebook_entry_trigram_key k INNER JOIN notebook_entry e ON e.id = k.entry_id"
    " WHERE k.rowid > (SELECT indexed FROM notebook_entry_trigram_state) AND +e.codex_id = %s"
    " AND (INSTR(e.search_title, %s) > 0 OR INSTR(e.search_content, %s) > 0 OR INSTR(e.search_tags_text, %s) > 0)"
    " AND +k.entry_id > %s"
)


def sqlite_trigram_params(codex_id: int, normalized_query: str, after: str | None = None) -> list[Any]:
    """``SQLITE_TRIGRAM_MATCH``'s parameters: the FTS5 phrase (its consecutive trigrams, a
    substring), then the codex and the query for each INSTR; with ``after`` (an entry id as
    the column holds it), ``SQLITE_TRIGRAM_MATCH_AFTER``'s."""
    phrase = '"' + normalized_query.replace('"', '""') + '"'
    if after is None:
        return [phrase, codex_id] + [normalized_query] * 3
    return [phrase, after, codex_id] + [normalized_query] * 3 + [after]


# Never read by a search: the full content (only its excerpt is), the provenance, and the
# tags' joined text, which only the trigram index reads.
NEVER_READ = ("content", "provenance", "search_tags_text")
# Read only to test a query exactly (``selectors._matches``).
SEARCH_COLUMNS = ("search_title", "search_content", "search_tags")
