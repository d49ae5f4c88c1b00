"""Drop the single-column indexes Django made for foreign keys that a composite index or
unique constraint already leads with.

Each one was a b-tree that every save (and every update that changes tags) also wrote,
for lookups the composite serves as well (a B-tree serves a lookup on any prefix of its
columns): on SQLite a save dirtied about 40 pages, 7 of them for these indexes.

| index dropped | served instead by |
| --- | --- |
| notebook_entry (codex_id) | notebook_entry_codex_id (codex_id, id) |
| notebook_entryrevision (codex_id) | notebook_entryrevision_writer (codex_id, writer_client_id, entry_id) |
| notebook_entryrevision (entry_id) | unique (entry_id, revision) |
| notebook_entrytag (codex_id) | notebook_entrytag_lookup (codex_id, value, entry_id) |
| notebook_entrytag (entry_id) | unique (entry_id, value) |
| notebook_entryrelatedagent (codex_id) | notebook_entryagent_lookup (codex_id, value, entry_id) |
| notebook_entryrelatedagent (entry_id) | unique (entry_id, value) |
| notebook_requestkey (codex_id) | unique (codex_id, request_id) |

Kept: notebook_requestkey (entry_id) (deletes find an entry's keys by it) and
notebook_entryrevision (writer_application_id) (deleting an application sets its
revisions' link to NULL by it).

The state change is ``AlterField(db_index=False)``; the database change is a plain
``DROP INDEX`` (found by introspection, whatever name it was given), because SQLite
applies ``AlterField`` by rebuilding the table, which would copy every row and drop the
trigram triggers on ``notebook_entry`` (migration 0002).
"""

import django.db.models.deletion
from django.db import migrations, models

# (model, field): the foreign keys whose own index goes.
FIELDS = [
    ("entry", "codex"),
    ("entryrevision", "codex"),
    ("entryrevision", "entry"),
    ("entrytag", "codex"),
    ("entrytag", "entry"),
    ("entryrelatedagent", "codex"),
    ("entryrelatedagent", "entry"),
    ("requestkey", "codex"),
]


def _single_column_indexes(schema_editor, model, column: str) -> list[str]:
    with schema_editor.connection.cursor() as cursor:
        constraints = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
    return [
        name
        for name, info in constraints.items()
        if info["index"] and info["columns"] == [column] and not info["unique"] and not info["primary_key"]
    ]


def drop_indexes(apps, schema_editor) -> None:
    for model_name, field_name in FIELDS:
        model = apps.get_model("notebook", model_name)
        column = model._meta.get_field(field_name).column
        for name in _single_column_indexes(schema_editor, model, column):
            schema_editor.execute(f"DROP INDEX {schema_editor.quote_name(name)}")


def create_indexes(apps, schema_editor) -> None:
    for model_name, field_name in FIELDS:
        model = apps.get_model("notebook", model_name)
        field = model._meta.get_field(field_name)
        if not _single_column_indexes(schema_editor, model, field.column):
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


def _foreign_key(to: str, related_name: str, *, index: bool) -> models.ForeignKey:
    return models.ForeignKey(
        on_delete=django.db.models.deletion.CASCADE, related_name=related_name, to=to, db_index=index
    )


RELATED_NAMES = {
    ("entry", "codex"): "entries",
    ("entryrevision", "codex"): "+",
    ("entryrevision", "entry"): "revisions",
    ("entrytag", "codex"): "+",
    ("entrytag", "entry"): "tag_rows",
    ("entryrelatedagent", "codex"): "+",
    ("entryrelatedagent", "entry"): "related_agent_rows",
    ("requestkey", "codex"): "request_keys",
}


class Migration(migrations.Migration):
    dependencies = [
        ("notebook", "0005_revision_writer"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name=model_name,
                    name=field_name,
                    field=_foreign_key(f"notebook.{field_name}", RELATED_NAMES[model_name, field_name], index=False),
                )
                for model_name, field_name in FIELDS
            ],
            database_operations=[migrations.RunPython(drop_indexes, create_indexes)],
        ),
    ]
