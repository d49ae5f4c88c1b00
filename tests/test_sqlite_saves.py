"""A save on SQLite's fast path: its statements prepared before the write queue and sent
back to back in it (notebook.sql.sqlite_saves)."""

import threading
import unittest

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TransactionTestCase, override_settings
from django.test.utils import CaptureQueriesContext

from notebook import services
from notebook.exceptions import ResourceExhausted
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag, RequestKey
from notebook.validation import parse_entry_input

INPUT = {"content": "Prepared before the queue.", "tags": ["alpha", "beta"], "relatedAgentIds": ["agent-1"]}


def statements(captured: CaptureQueriesContext) -> list[str]:
    """Each captured statement's verb and table."""
    kinds = []
    for query in captured:
        words = query["sql"].replace('"', "").split()
        if words[0] == "UPDATE":
            kinds.append(f"UPDATE {words[1]}")
        elif words[0] == "INSERT":
            kinds.append(f"INSERT {words[2]}")
        else:
            kinds.append(words[0])
    return kinds


@unittest.skipUnless(connection.vendor == "sqlite", "the write queue is SQLite's")
class SQLiteSaveTest(TransactionTestCase):
    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("saver"))

    def test_the_charge_comes_first_then_one_insert_per_table(self) -> None:
        with CaptureQueriesContext(connection) as captured:
            entry = services.entry_save(codex=self.codex, request_id="r-1", data=parse_entry_input(INPUT))
        self.assertEqual(
            statements(captured),
            [
                "BEGIN",
                "UPDATE notebook_codex",
                "INSERT notebook_entry",
                "INSERT notebook_requestkey",
                "INSERT notebook_entryrevision",
                "INSERT notebook_entrytag",
                "INSERT notebook_entryrelatedagent",
                "COMMIT",
            ],
        )
        self.assertEqual(
            sorted(EntryTag.objects.filter(entry=entry).values_list("value", flat=True)), ["alpha", "beta"]
        )
        self.assertEqual(
            list(EntryRelatedAgent.objects.filter(entry=entry).values_list("value", flat=True)), ["agent-1"]
        )

    def test_a_refused_charge_sends_no_insert_and_writes_nothing(self) -> None:
        with override_settings(CODEX_QUOTA_ENTRIES=0), CaptureQueriesContext(connection) as captured:
            with self.assertRaises(ResourceExhausted):
                services.entry_save(codex=self.codex, request_id="r-1", data=parse_entry_input(INPUT))
        self.assertNotIn("INSERT", " ".join(statements(captured)))
        self.assertEqual(Entry.objects.count(), 0)
        self.assertEqual(Codex.objects.get(pk=self.codex.pk).last_write_seq, 0)

    def test_concurrent_saves_each_store_the_write_number_their_charge_took(self) -> None:
        # Unwatched, so the statements go straight to the driver on the write connection.
        saved, errors = [], []

        def save(index: int) -> None:
            try:
                data = parse_entry_input({"content": f"Note {index}.", "tags": [f"t{index}"]})
                saved.append(services.entry_save(codex=self.codex, request_id=f"r-{index}", data=data))
            except Exception as error:
                errors.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=save, args=(index,)) for index in range(12)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        self.assertEqual(errors, [])
        stored = dict(Entry.objects.values_list("id", "write_seq"))
        self.assertEqual({entry.id: entry.write_seq for entry in saved}, stored)
        self.assertEqual(sorted(stored.values()), list(range(1, 13)))
        self.assertEqual(Codex.objects.get(pk=self.codex.pk).last_write_seq, 12)
        self.assertEqual(RequestKey.objects.count(), 12)
        self.assertEqual(EntryRevision.objects.count(), 12)
        self.assertEqual(EntryTag.objects.count(), 12)

    def test_a_reused_request_id_rolls_back_its_charge_and_rows(self) -> None:
        first = services.entry_save(codex=self.codex, request_id="r-1", data=parse_entry_input(INPUT))
        usage = Codex.objects.filter(pk=self.codex.pk).values("entry_count", "stored_bytes", "last_write_seq").get()
        again = services.entry_save(codex=self.codex, request_id="r-1", data=parse_entry_input(INPUT))
        self.assertEqual(again.id, first.id)
        self.assertEqual(
            Codex.objects.filter(pk=self.codex.pk).values("entry_count", "stored_bytes", "last_write_seq").get(), usage
        )
        self.assertEqual((Entry.objects.count(), EntryRevision.objects.count(), EntryTag.objects.count()), (1, 1, 2))
