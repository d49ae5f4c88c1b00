"""PostgreSQL: one GIN index whose keys are the codex's own trigrams, in place of migration
0002's three ``(codex_id, column gin_trgm_ops)`` indexes.

Those indexes keep one posting list per codex and one per trigram, so a search intersects
its codex's whole list with the word's lists over every codex. Where many people write at
once, their entries lie mixed in the table, and that intersection walks both lists to their
ends: for a word common in other codexes but rare in a large one, it cost what the server
holds, not what the codex holds.

Here each key is ``"<codex id>:<trigram>"`` (``notebook_entry_trigram_keys``), so a word's
posting lists hold only its own codex's entries that have each trigram, and the search
(``codex keys @> notebook_query_trigram_keys(codex, query)``) costs what its matches cost.
Each entry also has the key ``"<codex id>:"``, which a query with no trigram at all asks for.

Both functions use ``pg_trgm``'s own ``show_trgm``, so an entry and a query make their
trigrams alike, multibyte characters included (``pg_trgm`` hashes those). A query's keys are
only the trigrams that any text holding it as a substring must have: a trigram padded at
the query's start or end (``"  w"``, ``"rd "``) would only be there at a word's edge. They
are the trigrams that ``show_trgm`` gives the query, ``"a" || query || "a"`` and ``"b" ||
query || "b"`` alike: a padded edge trigram changes with the letter next to it, and one
padded at a separator inside the query does not. ``show_trgm`` is named with its schema,
as ``pg_dump``'s restore, which runs with an empty ``search_path``, finds it.

The keys are compared bytewise (``COLLATE "C"``): only their equality matters.

The index is built ``CONCURRENTLY`` (so the migration is not atomic): a server keeps
saving while a large table is indexed. SQLite is unchanged (its FTS5 table, migrations 0002
and 0007, is one for all codexes, and its lookup is by the word's rows alone).
"""

import importlib

from django.db import migrations

trigram = importlib.import_module("notebook.migrations.0002_search_trigram")

INDEX = "notebook_entry_trigram_keys"
ENTRY_KEYS = "notebook_entry_trigram_keys"
QUERY_KEYS = "notebook_query_trigram_keys"
# The indexed expression, as a statement must write it for the planner to use the index.
INDEXED = f"{ENTRY_KEYS}(codex_id, search_title, search_content, search_tags_text)"


def function_statements(schema: str) -> list[str]:
    """The two key functions, with ``show_trgm`` in ``schema`` (where ``pg_trgm`` is)."""
    show_trgm = f'"{schema}".show_trgm'
    return [
        f"CREATE OR REPLACE FUNCTION {ENTRY_KEYS}(codex bigint, title text, content text, tags text) "
        "RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ "
        "SELECT array_append(ARRAY(SELECT codex::text || ':' || t FROM unnest("
        f"{show_trgm}(coalesce(title, '') || ' ' || coalesce(content, '') || ' ' || coalesce(tags, ''))) AS t), "
        "codex::text || ':') $$",
        f"CREATE OR REPLACE FUNCTION {QUERY_KEYS}(codex bigint, query text) "
        "RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$ "
        "SELECT CASE WHEN cardinality(keys) > 0 THEN keys ELSE ARRAY[codex::text || ':'] END FROM (SELECT ARRAY("
        f"SELECT codex::text || ':' || t FROM (SELECT unnest({show_trgm}(query)) "
        f"INTERSECT SELECT unnest({show_trgm}('a' || query || 'a')) "
        f"INTERSECT SELECT unnest({show_trgm}('b' || query || 'b'))) AS inner_trigrams (t)) AS keys) AS found $$",
    ]


def create_statements(schema: str, concurrently: bool = True) -> list[str]:
    """The functions and the index (``scripts/bench_scale.py`` rebuilds the index without
    ``CONCURRENTLY``, inside its fill)."""
    how = " CONCURRENTLY" if concurrently else ""
    return function_statements(schema) + [
        # A build that failed half-way leaves an invalid index of this name: started afresh.
        f"DROP INDEX{how} IF EXISTS {INDEX}",
        f'CREATE INDEX{how} {INDEX} ON notebook_entry USING gin ({INDEXED} COLLATE "C")',
    ]


def trgm_schema(connection) -> str:
    """The schema that ``pg_trgm`` was created in."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
            " WHERE e.extname = 'pg_trgm'"
        )
        return cursor.fetchone()[0]


def create_keys_index(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in create_statements(trgm_schema(schema_editor.connection)):
        schema_editor.execute(statement)
    for name in trigram.PG_INDEXES:
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def restore_column_indexes(apps, schema_editor) -> None:
    if schema_editor.connection.vendor != "postgresql":
        return
    for statement in trigram.pg_create_statements():
        schema_editor.execute(statement.replace("CREATE INDEX", "CREATE INDEX CONCURRENTLY IF NOT EXISTS", 1))
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {ENTRY_KEYS}(bigint, text, text, text)")
    schema_editor.execute(f"DROP FUNCTION IF EXISTS {QUERY_KEYS}(bigint, text)")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("notebook", "0008_entry_write_seq"),
    ]

    operations = [
        migrations.RunPython(create_keys_index, restore_column_indexes, atomic=False),
    ]
