"""Migrations 0011 and 0012 put the codex in every unique key a table distributed by codex needs
(docs/capacity.md), keep the rows and (SQLite) the search index's triggers, and go back."""

import datetime as dt

from django.db import IntegrityError, connection, transaction
from django.test import TransactionTestCase

from notebook import selectors, services
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.validation import parse_entry_input, parse_search_params
from tests.migrations import before, latest, migrate, old_entry

FIRST = ("notebook", "0011_codex_in_unique_keys")
# (model, constraint name, its columns after the migrations).
KEYS = [
    (Entry, "notebook_entry_unique_per_codex", ["codex_id", "id"]),
    (EntryRevision, "notebook_entryrevision_unique_per_entry", ["entry_id", "revision", "codex_id"]),
    (EntryTag, "notebook_entrytag_unique_per_entry", ["entry_id", "value", "codex_id"]),
    (EntryRelatedAgent, "notebook_entryagent_unique_per_entry", ["entry_id", "value", "codex_id"]),
]
TRIGGERS = {"notebook_entry_trigram_insert", "notebook_entry_trigram_update", "notebook_entry_trigram_delete"}


def unique_columns(model) -> dict[str, list[str]]:
    """The table's unique keys (the primary key aside), by name where it has one: SQLite names
    a key written inside its CREATE TABLE ``sqlite_autoindex_...``, so those are listed too."""
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return {name: info["columns"] for name, info in constraints.items() if info["unique"] and not info["primary_key"]}


def triggers() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'notebook_entry'")
        return {name for (name,) in cursor.fetchall()}


class CodexKeysMigrationTest(TransactionTestCase):
    def test_the_keys_gain_the_codex_and_the_rows_stay(self) -> None:
        self.addCleanup(migrate, latest())
        apps = migrate(before(FIRST))
        User = apps.get_model("auth", "User")
        OldCodex = apps.get_model("notebook", "Codex")
        moment = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
        codex = OldCodex.objects.create(owner=User.objects.create(username="ann"))
        old = old_entry(apps, codex, "kept through the migration", moment)
        apps.get_model("notebook", "EntryTag").objects.create(codex=codex, entry=old, value="t")
        apps.get_model("notebook", "EntryRelatedAgent").objects.create(codex=codex, entry=old, value="a")
        apps.get_model("notebook", "EntryRevision").objects.create(
            codex=codex, entry=old, revision=1, content=old.content, recorded_at=moment
        )

        migrate(latest())
        for model, name, columns in KEYS:
            with self.subTest(table=model._meta.db_table):
                keys = unique_columns(model)
                self.assertIn(columns, list(keys.values()))
                if connection.vendor == "postgresql":  # SQLite does not name a key of its CREATE TABLE
                    self.assertEqual(keys[name], columns)
                self.assertEqual(model.objects.count(), 1)
        if connection.vendor == "sqlite":
            self.assertEqual(triggers(), TRIGGERS)
        # The keys hold, with the codex in them.
        with self.assertRaises(IntegrityError), transaction.atomic():
            EntryTag.objects.create(codex_id=codex.pk, entry_id=old.pk, value="t")
        # Writes and searches go on as before.
        ann = Codex.objects.get(pk=codex.pk)
        services.entry_save(codex=ann, request_id="r1", data=parse_entry_input({"content": "fresh words"}))
        for word in ("fresh", "kept"):
            page = selectors.entry_search(codex=ann, params=parse_search_params(query=word))
            self.assertEqual(len(page.entries), 1, word)

        # And back: the keys without the codex, the (codex, id) index a plain one again.
        migrate(before(FIRST))
        self.assertIn(["entry_id", "value"], list(unique_columns(EntryTag).values()))
        self.assertNotIn(["codex_id", "id"], list(unique_columns(Entry).values()))
        if connection.vendor == "sqlite":
            self.assertEqual(triggers(), TRIGGERS)
