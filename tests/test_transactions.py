"""SQLite checkpoints run off the request path (notebook.transactions)."""

import threading
import unittest
from unittest import mock

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TransactionTestCase

from notebook import services, transactions
from notebook.models import Entry
from notebook.validation import parse_entry_input


@unittest.skipUnless(connection.vendor == "sqlite", "checkpoints are SQLite's WAL")
class CheckpointTest(TransactionTestCase):
    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("alice"))

    def save(self, request_id: str) -> Entry:
        return services.entry_save(codex=self.codex, request_id=request_id, data=parse_entry_input({"content": "x"}))

    def test_requests_checkpoint_automatically_only_as_a_backstop(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            self.assertEqual(cursor.fetchone()[0], 20_000)

    def test_a_commit_returns_before_its_checkpoint_which_runs_in_another_thread(self) -> None:
        release, ran = threading.Event(), threading.Event()
        threads = []
        real = transactions._Checkpointer.checkpoint

        def checkpoint(checkpointer, mode="PASSIVE"):
            threads.append(threading.current_thread())
            release.wait(10)  # the commit below must return while this waits
            result = real(checkpointer, mode)
            ran.set()
            return result

        with mock.patch.object(transactions._Checkpointer, "checkpoint", checkpoint):
            self.save("first")  # returns although its checkpoint is held
            release.set()
            self.assertTrue(ran.wait(10), "no checkpoint ran after the commit")
        self.assertNotIn(threading.current_thread(), threads)
        self.assertTrue(Entry.objects.filter(codex=self.codex).exists())

    def test_the_checkpointer_copies_the_log_into_the_database_file(self) -> None:
        name = str(connection.settings_dict["NAME"])
        self.save("one")
        checkpointer = transactions._checkpointers[name]
        done = threading.Event()
        real = transactions._Checkpointer.checkpoint

        def checkpoint(checkpointer, mode="PASSIVE"):
            result = real(checkpointer, mode)
            done.set()
            return result

        with mock.patch.object(transactions._Checkpointer, "checkpoint", checkpoint):
            self.save("two")
            self.assertTrue(done.wait(10))
        self.assertTrue(checkpointer.thread.is_alive())
        # Everything in the log was copied: a checkpoint now finds nothing left to copy.
        busy, pages, copied = checkpointer.checkpoint()
        self.assertEqual((busy, pages), (0, copied))

    def test_a_long_log_is_finished_with_the_process_writers_held(self) -> None:
        name = str(connection.settings_dict["NAME"])
        lock = transactions._writer_lock(name)
        held = []
        done = threading.Event()
        calls = iter([(0, transactions.CATCH_UP_PAGES, transactions.CATCH_UP_PAGES), (0, 10, 10)])

        def checkpoint(checkpointer, mode="PASSIVE"):
            held.append((mode, lock.locked()))
            result = next(calls)
            if len(held) == 2:
                done.set()
            return result

        with mock.patch.object(transactions._Checkpointer, "checkpoint", checkpoint):
            self.save("three")
            self.assertTrue(done.wait(10))
        self.assertEqual(held, [("PASSIVE", False), ("RESTART", True)])
