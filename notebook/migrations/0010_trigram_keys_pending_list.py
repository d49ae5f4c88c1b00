"""PostgreSQL: the codex trigram keys' index keeps a pending list of at most 256 kB.

A GIN index puts new entries' keys in a pending list, unsorted, until a vacuum or an insert
that fills the list merges them into the index. Every search that asks the index reads the
whole list, whichever codex it is for. At the server's default limit (4 MB) that list held
thousands of rows between autovacuums, and reading it was most of a rare word's search. At
256 kB the list is merged sixteen times as often, each merge a sixteenth as large, so saves
cost what they did and a search reads a short list (``docs/performance.md``).

The limit is a storage parameter of the index: it is stored with it and survives a dump and
restore. Going back resets it to the server's ``gin_pending_list_limit``. SQLite has no such
index and is unchanged.
"""

from django.db import migrations

INDEX = "notebook_entry_trigram_keys"
# kB, as PostgreSQL counts the parameter.
PENDING_LIST_LIMIT = 256
SET_LIMIT = f"ALTER INDEX {INDEX} SET (gin_pending_list_limit = {PENDING_LIST_LIMIT})"
RESET_LIMIT = f"ALTER INDEX {INDEX} RESET (gin_pending_list_limit)"


def set_limit(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SET_LIMIT)


def reset_limit(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(RESET_LIMIT)


class Migration(migrations.Migration):
    dependencies = [
        ("notebook", "0009_codex_trigram_keys"),
    ]

    operations = [
        migrations.RunPython(set_limit, reset_limit),
    ]
