"""The codex in every unique key that a table distributed by codex needs (docs/capacity.md).

A table distributed by codex (Citus, or PostgreSQL's own hash partitioning) can only keep a
key unique where the key includes the codex: one codex's rows are all on one node (in one
partition), and that node can check only its own rows. These keys take the codex now, where
it costs nothing, so that the move past one primary finds them ready:

| table | before | after |
| --- | --- | --- |
| notebook_entry | index `notebook_entry_codex_id` (codex_id, id) | unique `notebook_entry_unique_per_codex` (codex_id, id) |
| notebook_entryrevision | unique (entry_id, revision) | unique (entry_id, revision, codex_id) |
| notebook_entrytag | unique (entry_id, value) | unique (entry_id, value, codex_id) |
| notebook_entryrelatedagent | unique (entry_id, value) | unique (entry_id, value, codex_id) |

Each new index begins with the columns of the one it replaces, so it serves every lookup that
one served (the search's walk of a codex in id order; an entry's rows by entry). The entry's
(codex_id, id) is the primary key a distributed table needs, ready to be made from this index,
and what the other tables' foreign keys will name. The codex goes last in the other keys, so
that lookups by entry alone (Django's cascades, the admin) still find an index; the order of a
key's columns does not matter to a distributed table. The cost is the codex's 8 bytes in each
row of those three indexes. (The keys left for the move, and why, are in docs/capacity.md.)

This migration changes the models' state and SQLite's tables: SQLite rebuilds each table to
change a unique constraint, and rebuilding ``notebook_entry`` drops its FTS5 triggers
(migration 0007), which are dropped before and made again after, as in migration 0008.
PostgreSQL's indexes are built in the next migration, concurrently, while the server keeps
writing.
"""

import importlib

from django.db import migrations, models

batches = importlib.import_module("notebook.migrations.0007_trigram_batches")


class OnSQLite(migrations.operations.base.Operation):
    """``operation``'s change to the models' state everywhere, and to the database on SQLite
    only (PostgreSQL makes the same change in migration 0012, without blocking writes)."""

    reversible = True

    def __init__(self, operation: migrations.operations.base.Operation) -> None:
        self.operation = operation

    def deconstruct(self):
        return self.__class__.__name__, [self.operation], {}

    def state_forwards(self, app_label, state) -> None:
        self.operation.state_forwards(app_label, state)

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if schema_editor.connection.vendor == "sqlite":
            self.operation.database_forwards(app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if schema_editor.connection.vendor == "sqlite":
            self.operation.database_backwards(app_label, schema_editor, from_state, to_state)

    def describe(self) -> str:
        return f"{self.operation.describe()} (the database on SQLite only)"


# (model, constraint name, its fields now) of the keys that gain the codex, last.
WIDENED = [
    ("entryrevision", "notebook_entryrevision_unique_per_entry", ["entry", "revision", "codex"]),
    ("entrytag", "notebook_entrytag_unique_per_entry", ["entry", "value", "codex"]),
    ("entryrelatedagent", "notebook_entryagent_unique_per_entry", ["entry", "value", "codex"]),
]


def _widened(model: str, name: str, fields: list[str]) -> list[migrations.operations.base.Operation]:
    return [
        OnSQLite(migrations.RemoveConstraint(model_name=model, name=name)),
        OnSQLite(
            migrations.AddConstraint(model_name=model, constraint=models.UniqueConstraint(fields=fields, name=name))
        ),
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("notebook", "0010_trigram_keys_pending_list"),
    ]

    operations = [
        migrations.RunPython(batches.drop_triggers, batches.create_triggers),
        OnSQLite(migrations.RemoveIndex(model_name="entry", name="notebook_entry_codex_id")),
        OnSQLite(
            migrations.AddConstraint(
                model_name="entry",
                constraint=models.UniqueConstraint(fields=["codex", "id"], name="notebook_entry_unique_per_codex"),
            )
        ),
        migrations.RunPython(batches.create_triggers, batches.drop_triggers),
        *(operation for widened in WIDENED for operation in _widened(*widened)),
    ]
