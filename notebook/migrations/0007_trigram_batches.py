"""SQLite: new entries reach the FTS5 trigram index in batches of 32, not one by one.

Migration 0002's insert trigger wrote each new entry into the FTS5 table in the save's own
transaction. FTS5 flushes what a transaction indexed as a new segment, so each save wrote
a segment of its own: about 10 of the 32 pages a save wrote to the log were the index's
(its segment, structure record, document size and key rows), and the trigger cost about
a third of a save's SQL.

Now:

- The insert trigger only gives the entry its key row. The key table's rowids become
  ``AUTOINCREMENT``, so they grow with every insert and are never reused.
- ``notebook_entry_trigram_state.indexed`` is the last key rowid the FTS5 table covers:
  entries whose key rowid is above it are *waiting*.
- When an entry's key rowid reaches ``indexed + 32``, a trigger on the key table indexes
  every waiting entry, with its current values, in that same transaction, and moves
  ``indexed`` up to it. One segment then holds 32 entries; fewer than 32 ever wait.
- The update and delete triggers change the FTS5 table only for entries it covers. A
  waiting entry is indexed with whatever its values are when its batch comes; a deleted one
  never is. (A contentless table must never be told to delete a row it does not hold.)
- A search (``notebook.search_sql.SQLITE_TRIGRAM_MATCH``) takes the FTS5 table's
  matches and the waiting entries that hold the query (``INSTR``, as its walk tests every
  entry), so nothing saved is ever missing from a search.

Everything happens inside the writing statement's transaction, in whatever process
writes (the server, a management command, the admin): the index is never behind a
committed write, only some of it is found another way. No thread, no queue to drain.

PostgreSQL is unchanged (its GIN indexes have their own pending list).

A later migration that makes SQLite rebuild ``notebook_entry`` drops its triggers with the
old table: it must run ``drop_triggers`` before and ``create_triggers`` after its change.
"""

import importlib

from django.db import migrations

BATCH = 32

KEY = "notebook_entry_trigram_key"
STATE = "notebook_entry_trigram_state"
FTS = "notebook_entry_trigram"
INDEXED = f"(SELECT indexed FROM {STATE})"


def _fts_row(row: str, *, delete: bool) -> str:
    """Index (or forget) the entry ``row`` (OLD or NEW) if the FTS5 table covers it."""
    columns = f"{FTS}(rowid, title, content, tags)"
    values = f"k.rowid, {row}.search_title, {row}.search_content, {row}.search_tags_text"
    if delete:
        # A contentless table forgets a row when told exactly what it indexed.
        columns, values = f"{FTS}({FTS}, rowid, title, content, tags)", f"'delete', {values}"
    return f"INSERT INTO {columns} SELECT {values} FROM {KEY} k WHERE k.entry_id = {row}.id AND k.rowid <= {INDEXED};"


# Every waiting entry, as it is now, in one FTS5 segment (in rowid order, as FTS5 appends best).
INDEX_WAITING = (
    f"INSERT INTO {FTS}(rowid, title, content, tags) "
    f"SELECT k.rowid, e.search_title, e.search_content, e.search_tags_text "
    f"FROM {KEY} k JOIN notebook_entry e ON e.id = k.entry_id WHERE k.rowid > {INDEXED} ORDER BY k.rowid"
)

CREATE_TRIGGERS = [
    f"CREATE TRIGGER notebook_entry_trigram_insert AFTER INSERT ON notebook_entry BEGIN "
    f"INSERT INTO {KEY}(entry_id) VALUES (NEW.id); END",
    f"CREATE TRIGGER notebook_entry_trigram_batch AFTER INSERT ON {KEY} "
    f"WHEN NEW.rowid >= {INDEXED} + {BATCH} BEGIN {INDEX_WAITING}; UPDATE {STATE} SET indexed = NEW.rowid; END",
    "CREATE TRIGGER notebook_entry_trigram_update "
    "AFTER UPDATE OF search_title, search_content, search_tags_text ON notebook_entry BEGIN "
    f"{_fts_row('OLD', delete=True)} {_fts_row('NEW', delete=False)} END",
    "CREATE TRIGGER notebook_entry_trigram_delete AFTER DELETE ON notebook_entry BEGIN "
    f"{_fts_row('OLD', delete=True)} DELETE FROM {KEY} WHERE entry_id = OLD.id; END",
]

TRIGGERS = [
    "notebook_entry_trigram_insert",
    "notebook_entry_trigram_batch",
    "notebook_entry_trigram_update",
    "notebook_entry_trigram_delete",
]
DROP_TRIGGERS = [f"DROP TRIGGER IF EXISTS {name}" for name in TRIGGERS]

# The key table again, its rowids AUTOINCREMENT (kept, and so the FTS5 table's).
REKEY = [
    f"CREATE TABLE {KEY}_new (rowid INTEGER PRIMARY KEY AUTOINCREMENT, entry_id char(32) NOT NULL UNIQUE)",
    f"INSERT INTO {KEY}_new(rowid, entry_id) SELECT rowid, entry_id FROM {KEY} ORDER BY rowid",
    f"DROP TABLE {KEY}",
    f"ALTER TABLE {KEY}_new RENAME TO {KEY}",
    f"CREATE TABLE {STATE} (id INTEGER PRIMARY KEY CHECK (id = 1), indexed INTEGER NOT NULL)",
    f"INSERT INTO {STATE}(id, indexed) SELECT 1, COALESCE(MAX(rowid), 0) FROM {KEY}",
]

# Back to 0002's triggers: index the waiting entries first.
UNDO = [INDEX_WAITING, f"DROP TABLE {STATE}"]


def drop_triggers(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in DROP_TRIGGERS:
            schema_editor.execute(statement)


def create_triggers(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in CREATE_TRIGGERS:
            schema_editor.execute(statement)


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        for statement in DROP_TRIGGERS + REKEY + CREATE_TRIGGERS:
            schema_editor.execute(statement)


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "sqlite":
        trigram = importlib.import_module("notebook.migrations.0002_search_trigram")
        old_triggers = [statement for statement in trigram.SQLITE_CREATE if statement.startswith("CREATE TRIGGER")]
        for statement in DROP_TRIGGERS + UNDO + old_triggers:
            schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("notebook", "0006_drop_redundant_fk_indexes"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
