"""PostgreSQL: migration 0011's keys, built without blocking writes.

Each new unique index is built ``CONCURRENTLY`` (so this migration is not atomic), then takes
its constraint's place in one ``ALTER TABLE``, which holds the table's lock only for that
swap (``ADD CONSTRAINT ... UNIQUE USING INDEX`` gives the index the constraint's name); the
entry table's plain (codex_id, id) index goes after. A run that stopped half-way is run again:
a key already in place is left as it is, and a build that failed (an invalid index left
behind) starts afresh. SQLite has nothing to do here (migration 0011 rebuilt its tables).
"""

from django.db import migrations

ENTRY = "notebook_entry"
ENTRY_KEY = "notebook_entry_unique_per_codex"
ENTRY_INDEX = "notebook_entry_codex_id"
# (table, constraint, its columns before, after) of the keys that gained the codex.
WIDENED = [
    ("notebook_entryrevision", "notebook_entryrevision_unique_per_entry", ["entry_id", "revision"]),
    ("notebook_entrytag", "notebook_entrytag_unique_per_entry", ["entry_id", "value"]),
    ("notebook_entryrelatedagent", "notebook_entryagent_unique_per_entry", ["entry_id", "value"]),
]


def _unique_columns(schema_editor, table: str, name: str) -> list[str] | None:
    """The columns of the unique constraint ``name`` of ``table``, or None if it has none."""
    connection = schema_editor.connection
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table).get(name)
    return found["columns"] if found is not None and found["unique"] else None


def _build(schema_editor, table: str, index: str, columns: list[str]) -> None:
    """A unique index of ``columns``, built without blocking writes (afresh if one was left)."""
    quote = schema_editor.quote_name
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {quote(index)}")
    listed = ", ".join(quote(column) for column in columns)
    schema_editor.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {quote(index)} ON {quote(table)} ({listed})")


def _swap(schema_editor, table: str, name: str, columns: list[str]) -> None:
    """Make the unique constraint ``name`` of ``table`` be over ``columns`` (it may not exist yet)."""
    if _unique_columns(schema_editor, table, name) == columns:
        return
    quote = schema_editor.quote_name
    building = f"{name}_next"[:63]
    _build(schema_editor, table, building, columns)
    drop = f"DROP CONSTRAINT IF EXISTS {quote(name)}, "
    schema_editor.execute(
        f"ALTER TABLE {quote(table)} {drop}ADD CONSTRAINT {quote(name)} UNIQUE USING INDEX {quote(building)}"
    )


def forwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    _swap(schema_editor, ENTRY, ENTRY_KEY, ["codex_id", "id"])
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {schema_editor.quote_name(ENTRY_INDEX)}")
    for table, name, columns in WIDENED:
        _swap(schema_editor, table, name, [*columns, "codex_id"])


def backwards(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    quote = schema_editor.quote_name
    for table, name, columns in WIDENED:
        _swap(schema_editor, table, name, columns)
    schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {quote(ENTRY_INDEX)} ON {ENTRY} (codex_id, id)")
    schema_editor.execute(f"ALTER TABLE {quote(ENTRY)} DROP CONSTRAINT IF EXISTS {quote(ENTRY_KEY)}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("notebook", "0011_codex_in_unique_keys"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards, atomic=False),
    ]
