"""Migration 0007_trigram_batches on SQLite: the entries already indexed stay so, under the
same FTS5 rowids; new ones wait for their batch; undone, the waiting ones are indexed."""

import datetime as dt
import unittest

from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import TransactionTestCase

from tests.migrations import migrate, old_entry
from tests.test_selectors_search_index import fts_holds

BEFORE = ("notebook", "0006_drop_redundant_fk_indexes")
BATCHES = ("notebook", "0007_trigram_batches")
NOW = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


def fetch(sql: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchall()


@unittest.skipUnless(connection.vendor == "sqlite", "the batches are SQLite's")
class TrigramBatchesMigrationTest(TransactionTestCase):
    def migrate(self, target: tuple[str, str]):
        return migrate([target])

    def save(self, apps, codex, content: str):
        return old_entry(apps, codex, content, NOW)

    def test_indexed_entries_stay_indexed_and_new_ones_wait(self) -> None:
        self.addCleanup(self.migrate, MigrationExecutor(connection).loader.graph.leaf_nodes()[0])
        apps = self.migrate(BEFORE)
        codex = apps.get_model("notebook", "Codex").objects.create(
            owner=apps.get_model("auth", "User").objects.create(username="old-timer")
        )
        old = [self.save(apps, codex, f"old note {number}") for number in range(5)]
        old.pop().delete()  # its key rowid, the highest, is free again
        keys = fetch("SELECT rowid, entry_id FROM notebook_entry_trigram_key ORDER BY rowid")

        apps = self.migrate(BATCHES)
        codex = apps.get_model("notebook", "Codex").objects.get()
        self.assertEqual(fetch("SELECT rowid, entry_id FROM notebook_entry_trigram_key ORDER BY rowid"), keys)
        self.assertEqual(fetch("SELECT indexed FROM notebook_entry_trigram_state"), [(keys[-1][0],)])
        self.assertEqual(fts_holds("old note"), {entry.id.hex for entry in old})
        new = self.save(apps, codex, "new note")
        self.assertEqual(fts_holds("new note"), set())  # waiting for its batch
        self.assertEqual(
            fetch(f"SELECT rowid FROM notebook_entry_trigram_key WHERE entry_id = '{new.id.hex}'"), [(keys[-1][0] + 1,)]
        )

        apps = self.migrate(BEFORE)
        self.assertEqual(fts_holds("new note"), {new.id.hex})
        self.assertEqual(fetch("SELECT name FROM sqlite_master WHERE name = 'notebook_entry_trigram_state'"), [])
        codex = apps.get_model("notebook", "Codex").objects.get()
        newer = self.save(apps, codex, "newer note")
        self.assertEqual(fts_holds("newer note"), {newer.id.hex})  # 0002's triggers index at once
