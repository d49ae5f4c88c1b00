"""Trigram indexes so that a search's query narrows candidates in the database.

PostgreSQL: ``pg_trgm`` GIN indexes over the codex and the normalized title, content and
tags (``codex_id = X AND col LIKE '%q%'`` on an already case-folded column uses them; the
codex column, through ``btree_gin``, keeps other codexes' matches out of the bitmap).

SQLite: an FTS5 ``trigram`` table over the same three columns, kept in sync by
triggers on ``notebook_entry``. It is contentless (it stores no second copy of the
text) and its rowids come from a small key table with an ``INTEGER PRIMARY KEY``,
because the entry table's own implicit rowids may change on VACUUM.

Both are only prefilters: ``notebook.selectors`` re-checks every candidate exactly.

Migration 0007 replaced these triggers: new entries now reach the FTS5 table in batches.
A later migration that makes SQLite rebuild ``notebook_entry`` (most column changes do)
drops the triggers with the old table: such a migration must run 0007's
``drop_triggers`` before and ``create_triggers`` after its change (the search tests fail
otherwise, since saved entries would not reach the index).
"""

from django.db import migrations, models

PG_INDEXES = {
    "notebook_entry_title_trgm": "search_title",
    "notebook_entry_content_trgm": "search_content",
    "notebook_entry_tags_trgm": "search_tags_text",
}


def pg_create_statements() -> list[str]:
    """The statements that create the PostgreSQL trigram indexes (scripts/bench_scale.py rebuilds them).

    Each index leads with ``codex_id`` (``btree_gin`` gives GIN its ``=`` on bigint), so a
    search intersects its codex's posting list with the word's inside the index: a word
    common in other codexes costs no heap visits there.
    """
    return ["CREATE EXTENSION IF NOT EXISTS pg_trgm", "CREATE EXTENSION IF NOT EXISTS btree_gin"] + [
        f"CREATE INDEX {name} ON notebook_entry USING gin (codex_id, {column} gin_trgm_ops)"
        for name, column in PG_INDEXES.items()
    ]


PG_BACKFILL = r"""
UPDATE notebook_entry SET search_tags_text = COALESCE(
    (SELECT string_agg(value, E'\n' ORDER BY ordinality)
     FROM jsonb_array_elements_text(search_tags) WITH ORDINALITY), '')
"""

SQLITE_BACKFILL = r"""
UPDATE notebook_entry SET search_tags_text = COALESCE(
    (SELECT group_concat(value, char(10)) FROM (SELECT value FROM json_each(search_tags) ORDER BY key)), '')
"""

# The FTS row of an entry is the key table's rowid for that entry.
SQLITE_ROWID = "(SELECT rowid FROM notebook_entry_trigram_key WHERE entry_id = {row}.id)"
SQLITE_FTS_INSERT = (
    "INSERT INTO notebook_entry_trigram(rowid, title, content, tags) VALUES ("
    + SQLITE_ROWID
    + ", {row}.search_title, {row}.search_content, {row}.search_tags_text);"
)
# A contentless FTS5 table forgets a row when told exactly what it indexed.
SQLITE_FTS_DELETE = (
    "INSERT INTO notebook_entry_trigram(notebook_entry_trigram, rowid, title, content, tags) VALUES ('delete', "
    + SQLITE_ROWID
    + ", {row}.search_title, {row}.search_content, {row}.search_tags_text);"
)

SQLITE_CREATE = [
    "CREATE TABLE notebook_entry_trigram_key (rowid INTEGER PRIMARY KEY, entry_id char(32) NOT NULL UNIQUE)",
    # case_sensitive 1: the columns are already NFKC + casefolded, so no second folding.
    "CREATE VIRTUAL TABLE notebook_entry_trigram USING fts5("
    "title, content, tags, content='', tokenize='trigram case_sensitive 1')",
    "CREATE TRIGGER notebook_entry_trigram_insert AFTER INSERT ON notebook_entry BEGIN "
    "INSERT INTO notebook_entry_trigram_key(entry_id) VALUES (NEW.id); " + SQLITE_FTS_INSERT.format(row="NEW") + " END",
    "CREATE TRIGGER notebook_entry_trigram_update "
    "AFTER UPDATE OF search_title, search_content, search_tags_text ON notebook_entry BEGIN "
    + SQLITE_FTS_DELETE.format(row="OLD")
    + " "
    + SQLITE_FTS_INSERT.format(row="NEW")
    + " END",
    "CREATE TRIGGER notebook_entry_trigram_delete AFTER DELETE ON notebook_entry BEGIN "
    + SQLITE_FTS_DELETE.format(row="OLD")
    + " DELETE FROM notebook_entry_trigram_key WHERE entry_id = OLD.id; END",
    "INSERT INTO notebook_entry_trigram_key(entry_id) SELECT id FROM notebook_entry ORDER BY id",
    "INSERT INTO notebook_entry_trigram(rowid, title, content, tags) "
    "SELECT k.rowid, e.search_title, e.search_content, e.search_tags_text "
    "FROM notebook_entry e JOIN notebook_entry_trigram_key k ON k.entry_id = e.id",
]

SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS notebook_entry_trigram_insert",
    "DROP TRIGGER IF EXISTS notebook_entry_trigram_update",
    "DROP TRIGGER IF EXISTS notebook_entry_trigram_delete",
    "DROP TABLE IF EXISTS notebook_entry_trigram",
    "DROP TABLE IF EXISTS notebook_entry_trigram_key",
]


def backfill_tags_text(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute(PG_BACKFILL)
    elif vendor == "sqlite":
        schema_editor.execute(SQLITE_BACKFILL)


def create_trigram_index(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for statement in pg_create_statements():
            schema_editor.execute(statement)
    elif vendor == "sqlite":
        for statement in SQLITE_CREATE:
            schema_editor.execute(statement)


def drop_trigram_index(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        for name in PG_INDEXES:
            schema_editor.execute(f"DROP INDEX IF EXISTS {name}")
    elif vendor == "sqlite":
        for statement in SQLITE_DROP:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("notebook", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="entry",
            name="search_tags_text",
            field=models.TextField(blank=True, default=""),
        ),
        migrations.RunPython(backfill_tags_text, migrations.RunPython.noop, elidable=True),
        migrations.RunPython(create_trigram_index, drop_trigram_index),
    ]
