"""The notebook tables carry no index that another index already serves (migration 0006),
and lookups by each foreign key still find an index."""

import uuid

from django.db import connection, transaction
from django.test import TestCase

from notebook.models import Entry, EntryRelatedAgent, EntryRevision, EntryTag, RequestKey

NOTEBOOK_MODELS = (Entry, EntryRevision, EntryTag, EntryRelatedAgent, RequestKey)


def indexes_of(model) -> dict[str, tuple[list[str], bool]]:
    """Every index (unique ones and the primary key included): name -> (columns, unique)."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {
        name: (info["columns"], info["unique"] or info["primary_key"])
        for name, info in constraints.items()
        if info["index"] or info["unique"] or info["primary_key"]
    }


class RedundantIndexTest(TestCase):
    def test_no_plain_index_is_a_leading_prefix_of_another_index(self) -> None:
        # Writes maintain every index; one whose columns begin another's serves no lookup
        # the longer one does not (a unique one is a constraint, so it stays).
        for model in NOTEBOOK_MODELS:
            indexes = indexes_of(model)
            for name, (columns, unique) in indexes.items():
                # An index of expressions alone (PostgreSQL's codex trigram keys) lists no
                # column, and so begins no other index.
                if unique or not columns:
                    continue
                for other, (other_columns, _) in indexes.items():
                    with self.subTest(table=model._meta.db_table, index=name, covered_by=other):
                        self.assertFalse(
                            other != name and other_columns[: len(columns)] == columns,
                            f"{name} {columns} is a prefix of {other} {other_columns}",
                        )

    def test_lookups_by_each_foreign_key_still_use_an_index(self) -> None:
        for model in NOTEBOOK_MODELS:
            for field in model._meta.concrete_fields:
                if not field.is_relation:
                    continue
                table, column = (connection.ops.quote_name(name) for name in (model._meta.db_table, field.column))
                with self.subTest(table=model._meta.db_table, column=field.column):
                    value = field.target_field.to_python(uuid.uuid4() if field.related_model is Entry else 1)
                    plan = self.plan(
                        f"SELECT * FROM {table} WHERE {column} = %s", [field.get_db_prep_value(value, connection)]
                    )
                    self.assertIn("index", plan.lower())

    def plan(self, sql: str, params: list) -> str:
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                # Small tables: make the planner show whether an index could serve at all.
                cursor.execute("SET LOCAL enable_seqscan = off")
                cursor.execute("EXPLAIN " + sql, params)
            else:
                cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
            return "\n".join(str(row) for row in cursor.fetchall())
