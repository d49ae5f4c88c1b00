"""Migration 0008_entry_write_seq numbers existing entries in their old order, starts each
codex's counter after them, and (SQLite) leaves the search index's triggers in place."""

import datetime as dt

from django.db import connection
from django.test import TransactionTestCase

from notebook import selectors, services
from notebook.models import Codex, Entry
from notebook.validation import parse_entry_input, parse_search_params
from tests.migrations import before, latest, migrate, old_entry

WRITE_SEQ_MIGRATION = ("notebook", "0008_entry_write_seq")


class WriteSeqMigrationTest(TransactionTestCase):
    def test_entries_are_numbered_in_their_old_order_and_new_writes_follow(self) -> None:
        self.addCleanup(migrate, latest())
        apps = migrate(before(WRITE_SEQ_MIGRATION))
        User = apps.get_model("auth", "User")
        OldCodex = apps.get_model("notebook", "Codex")
        early = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
        late = early + dt.timedelta(seconds=1)
        codexes = [OldCodex.objects.create(owner=User.objects.create(username=name)) for name in ("ann", "ben")]
        old = {}
        for codex in codexes:
            for moment, content in [(late, "late"), (early, "early"), (late, "late too")]:
                entry = old_entry(apps, codex, content, moment)
                old[(codex.pk, content)] = entry.id

        migrate(latest())
        for codex in codexes:
            ordered = sorted(
                [(early, old[(codex.pk, "early")])] + [(late, old[(codex.pk, name)]) for name in ("late", "late too")]
            )
            numbers = dict(Entry.objects.filter(codex_id=codex.pk).values_list("id", "write_seq"))
            self.assertEqual([numbers[entry_id] for _, entry_id in ordered], [1, 2, 3])
            self.assertEqual(Codex.objects.get(pk=codex.pk).last_write_seq, 3)

        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'notebook_entry'")
                triggers = {name for (name,) in cursor.fetchall()}
            self.assertEqual(
                triggers,
                {"notebook_entry_trigram_insert", "notebook_entry_trigram_update", "notebook_entry_trigram_delete"},
            )
        # A new save takes the codex's next number and is found by a search.
        ann = Codex.objects.get(pk=codexes[0].pk)
        saved = services.entry_save(codex=ann, request_id="r1", data=parse_entry_input({"content": "fresh words"}))
        self.assertEqual(Entry.objects.get(pk=saved.id).write_seq, 4)
        page = selectors.entry_search(codex=ann, params=parse_search_params(query="fresh"))
        self.assertEqual([entry.id for entry in page.entries], [saved.id])
