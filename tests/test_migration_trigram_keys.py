"""Migrations 0009_codex_trigram_keys and 0010_trigram_keys_pending_list (PostgreSQL): entries
saved before them are found by the codex keys' index, which replaces migration 0002's three
column indexes and keeps a short pending list; going back restores what was."""

import datetime as dt
import unittest

from django.db import connection
from django.test import TransactionTestCase

from notebook import selectors
from notebook.models import Codex
from tests.migrations import before, latest, migrate, old_entry

KEYS_MIGRATION = ("notebook", "0009_codex_trigram_keys")
PENDING_LIST_MIGRATION = ("notebook", "0010_trigram_keys_pending_list")
COLUMN_INDEXES = {"notebook_entry_title_trgm", "notebook_entry_content_trgm", "notebook_entry_tags_trgm"}


def trigram_indexes() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'notebook_entry'"
            " AND (indexname LIKE '%%_trgm' OR indexname = 'notebook_entry_trigram_keys')"
        )
        return {name for (name,) in cursor.fetchall()}


def keys_index_options() -> list[str] | None:
    """The storage parameters of the codex keys' index (``None`` when it has none)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT reloptions FROM pg_class WHERE relname = 'notebook_entry_trigram_keys'")
        return cursor.fetchone()[0]


@unittest.skipUnless(connection.vendor == "postgresql", "a PostgreSQL index")
class TrigramKeysMigrationTest(TransactionTestCase):
    def test_older_entries_are_found_by_the_codex_keys_and_going_back_restores_the_column_indexes(self) -> None:
        self.addCleanup(migrate, latest())
        apps = migrate(before(KEYS_MIGRATION))
        self.assertEqual(trigram_indexes(), COLUMN_INDEXES)
        codex = apps.get_model("notebook", "Codex").objects.create(
            owner=apps.get_model("auth", "User").objects.create(username="old-timer"), entry_count=1
        )
        entry = old_entry(apps, codex, "an old note of the quokka", dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC))

        migrate([KEYS_MIGRATION])
        self.assertEqual(trigram_indexes(), {"notebook_entry_trigram_keys"})
        # The trigram step itself: a sample of no entry leaves the whole codex to the index.
        found = selectors._indexed_candidates(
            Codex.objects.get(pk=codex.pk), {"query": "quokka", "search_columns": False}, None, 21
        )
        self.assertEqual([found_entry.id for found_entry in found], [entry.id])

        migrate(before(KEYS_MIGRATION))
        self.assertEqual(trigram_indexes(), COLUMN_INDEXES)
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_proc WHERE proname LIKE 'notebook_%%_trigram_keys'")
            self.assertEqual(cursor.fetchone()[0], 0)

    def test_the_keys_index_keeps_a_short_pending_list_and_going_back_resets_it(self) -> None:
        self.assertEqual(keys_index_options(), ["gin_pending_list_limit=256"])
        self.addCleanup(migrate, latest())
        migrate(before(PENDING_LIST_MIGRATION))
        self.assertIsNone(keys_index_options())
        migrate([PENDING_LIST_MIGRATION])
        self.assertEqual(keys_index_options(), ["gin_pending_list_limit=256"])
