"""SQLite writes: acknowledged once on disk (the group sync), checkpointed off the request path
(notebook.transactions)."""

import asyncio
import os
import sqlite3
import tempfile
import threading
import time
import unittest
import uuid
from unittest import mock

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, OperationalError, connection, connections
from django.test import TransactionTestCase
from django.test.utils import CaptureQueriesContext

import mcp_endpoint.server  # noqa: F401  (defines the metrics of the tools, which run_tool counts)
from mcp_endpoint.boundary import run_sync
from mcp_endpoint.results import run_tool
from notebook import services, transactions
from notebook.exceptions import NotFound
from notebook.models import Entry
from notebook.representations import entry_dict
from notebook.sqlite import files, group_sync
from notebook.sqlite.checkpointer import CATCH_UP_PAGES, Checkpointer
from notebook.transactions import write_transaction
from notebook.validation import parse_entry_input


@unittest.skipUnless(connection.vendor == "sqlite", "checkpoints are SQLite's WAL")
class CheckpointTest(TransactionTestCase):
    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("alice"))

    def save(self, request_id: str) -> Entry:
        return services.entry_save(codex=self.codex, request_id=request_id, data=parse_entry_input({"content": "x"}))

    def checkpoint_once_free(self, checkpointer: Checkpointer, mode: str = "PASSIVE") -> tuple[int, int, int]:
        """The test's own checkpoint, asked again (bounded) while the background checkpointer
        runs one: SQLite answers (1, -1, -1) at once when another checkpoint holds the lock."""
        deadline = time.monotonic() + 10
        while (result := checkpointer.checkpoint(mode)) == (1, -1, -1) and time.monotonic() < deadline:
            time.sleep(0.01)
        return result

    def test_requests_checkpoint_automatically_only_as_a_backstop(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            self.assertEqual(cursor.fetchone()[0], 20_000)

    def test_a_commit_returns_before_its_checkpoint_which_runs_in_another_thread(self) -> None:
        release, ran = threading.Event(), threading.Event()
        threads = []
        real = Checkpointer.checkpoint

        def checkpoint(checkpointer, mode="PASSIVE"):
            threads.append(threading.current_thread())
            release.wait(10)  # the commit below must return while this waits
            result = real(checkpointer, mode)
            ran.set()
            return result

        with mock.patch.object(Checkpointer, "checkpoint", checkpoint):
            self.save("first")  # returns although its checkpoint is held
            release.set()
            self.assertTrue(ran.wait(10), "no checkpoint ran after the commit")
        self.assertNotIn(threading.current_thread(), threads)
        self.assertTrue(Entry.objects.filter(codex=self.codex).exists())

    def test_the_checkpointer_copies_the_log_into_the_database_file(self) -> None:
        name = str(connection.settings_dict["NAME"])
        self.save("one")
        checkpointer = files._files[name].checkpointer
        done = threading.Event()
        real = Checkpointer.checkpoint

        def checkpoint(checkpointer, mode="PASSIVE"):
            result = real(checkpointer, mode)
            done.set()
            return result

        with mock.patch.object(Checkpointer, "checkpoint", checkpoint):
            self.save("two")
            self.assertTrue(done.wait(10))
        self.assertTrue(checkpointer.thread.is_alive())
        # Everything in the log was copied: a checkpoint now finds nothing left to copy.
        busy, pages, copied = self.checkpoint_once_free(checkpointer)
        self.assertEqual((busy, pages), (0, copied))

    def test_a_long_log_is_finished_with_the_process_writers_held(self) -> None:
        lock = transactions.write_queue()
        held = []
        done = threading.Event()
        calls = iter([(0, CATCH_UP_PAGES, CATCH_UP_PAGES), (0, 10, 10)])

        def checkpoint(checkpointer, mode="PASSIVE"):
            held.append((mode, lock.locked()))
            result = next(calls)
            if len(held) == 2:
                done.set()
            return result

        with mock.patch.object(Checkpointer, "checkpoint", checkpoint):
            self.save("three")
            self.assertTrue(done.wait(10))
        self.assertEqual(held, [("PASSIVE", False), ("RESTART", True)])

    def test_a_long_reader_makes_the_catch_up_give_up_instead_of_holding_the_writers(self) -> None:
        # A reader of a snapshot in the log, as an online backup's copy is, left open.
        self.save("before")
        reader = sqlite3.connect(str(connection.settings_dict["NAME"]), isolation_level=None)
        self.addCleanup(reader.close)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM notebook_entry").fetchone()
        self.save("after")  # the log now has pages the reader must not lose
        checkpointer = files._files[str(connection.settings_dict["NAME"])].checkpointer
        outcome = []
        catch_up = threading.Thread(target=lambda: outcome.append(checkpointer.checkpoint("RESTART")))
        catch_up.start()
        # The full busy timeout is 20 s; the catch-up gives up long before the reader ends.
        catch_up.join(timeout=10)
        self.assertFalse(catch_up.is_alive(), "the catch-up waited for the reader")
        self.assertEqual(outcome[0][0], 1)  # busy: the log was not restarted under the reader
        reader.execute("COMMIT")
        self.assertEqual(self.checkpoint_once_free(checkpointer, "RESTART")[0], 0)


@unittest.skipUnless(connection.vendor == "sqlite", "the group sync is SQLite's WAL")
class GroupSyncTest(TransactionTestCase):
    """A notebook write returns only once its commit is on disk (the log synced after the
    commit); writers that commit while a sync runs share the next one."""

    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("alice"))
        self.log = str(connection.settings_dict["NAME"]) + "-wal"

    def data(self, text: str = "x"):
        return parse_entry_input({"content": text})

    def committed(self, request_id: str) -> bool:
        """Whether a save with this request id is committed, seen from another connection."""
        with sqlite3.connect(str(connection.settings_dict["NAME"])) as other:
            found = other.execute("SELECT 1 FROM notebook_requestkey WHERE request_id = ?", [request_id]).fetchone()
        return found is not None

    def test_commits_leave_the_log_to_the_write_and_the_write_syncs_it_after_its_commit(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA synchronous")
            self.assertEqual(cursor.fetchone()[0], 1)  # NORMAL: COMMIT itself does not sync
        seen = []
        real_fsync = os.fsync

        def fsync(descriptor: int) -> None:
            seen.append((os.readlink(f"/proc/self/fd/{descriptor}"), self.committed("r-1")))
            real_fsync(descriptor)

        with mock.patch("notebook.sqlite.group_sync.os.fsync", side_effect=fsync):
            services.entry_save(codex=self.codex, request_id="r-1", data=self.data())
        # Before entry_save returned: one sync of the log, begun after the commit.
        self.assertEqual(seen, [(os.path.realpath(self.log), True)])

    def test_every_write_service_syncs_before_it_returns(self) -> None:
        entry = services.entry_save(codex=self.codex, request_id="r-1", data=self.data())
        with mock.patch("notebook.sqlite.group_sync.os.fsync", wraps=os.fsync) as fsync:
            services.entry_update(codex=self.codex, entry_id=entry.id, expected_revision=1, data=self.data("y"))
            self.assertEqual(fsync.call_count, 1)
            services.entry_delete(codex=self.codex, entry_id=entry.id)
            self.assertEqual(fsync.call_count, 2)

    def test_a_replayed_save_waits_for_the_sync_of_the_save_it_returns(self) -> None:
        services.entry_save(codex=self.codex, request_id="r-1", data=self.data())
        with mock.patch("notebook.sqlite.group_sync.os.fsync", wraps=os.fsync) as fsync:
            services.entry_save(codex=self.codex, request_id="r-1", data=self.data())
        self.assertEqual(fsync.call_count, 1)

    def test_writers_that_commit_during_a_sync_share_the_next_one(self) -> None:
        real_fsync = os.fsync
        syncs = []
        log_sync = files.file_of(connection).sync
        all_committed = log_sync.committed + 8

        def slow_fsync(descriptor: int) -> None:
            syncs.append(threading.current_thread().name)
            # A slow disk: the first sync lasts until every writer has committed (bounded),
            # however slowly the machine runs them, so the later commits share one sync.
            deadline = time.monotonic() + 10
            while len(syncs) == 1 and log_sync.committed < all_committed and time.monotonic() < deadline:
                time.sleep(0.005)
            real_fsync(descriptor)

        start = threading.Barrier(8)
        errors = []

        def save(number: int) -> None:
            try:
                start.wait(10)
                services.entry_save(codex=self.codex, request_id=f"r-{number}", data=self.data(f"note {number}"))
            except Exception as error:
                errors.append(error)
            finally:
                connection.close()

        with mock.patch("notebook.sqlite.group_sync.os.fsync", side_effect=slow_fsync):
            threads = [threading.Thread(target=save, args=(number,)) for number in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        self.assertEqual(errors, [])
        self.assertEqual(Entry.objects.filter(codex=self.codex).count(), 8)
        self.assertIn(len(syncs), (1, 2))  # the commits during the first sync shared the second

    def test_a_write_that_fails_is_not_synced_or_acknowledged(self) -> None:
        with (
            mock.patch("notebook.sqlite.group_sync.os.fsync", wraps=os.fsync) as fsync,
            self.assertRaises(NotFound),
        ):
            services.entry_update(codex=self.codex, entry_id=uuid.uuid4(), expected_revision=1, data=self.data())
        fsync.assert_not_called()


class LogSyncTicketsTest(unittest.TestCase):
    """The tickets of the group sync, without a database: a sync covers exactly the
    commits made before it began, and waits briefly for writers already under way."""

    def setUp(self) -> None:
        directory = self.enterContext(tempfile.TemporaryDirectory())
        database = os.path.join(directory, "db.sqlite3")
        open(database + "-wal", "wb").close()
        self.sync = group_sync.LogSync(database)
        self.addCleanup(self.sync.close)

    def test_a_sync_covers_commits_made_before_it_began_and_not_after(self) -> None:
        sync = self.sync
        inside, release = threading.Event(), threading.Event()
        calls = []

        def fsync(descriptor: int) -> None:
            calls.append(sync.committed)
            if len(calls) == 1:
                inside.set()
                release.wait(10)

        with mock.patch("notebook.sqlite.group_sync.os.fsync", side_effect=fsync):
            first = sync.commit()
            inside.wait(10)  # the first sync runs, covering ticket 1 only
            late = sync.commit()  # a commit during that sync: needs a sync of its own
            release.set()
            sync.wait(first)
            sync.wait(late)
        self.assertEqual(calls, [1, 2])
        self.assertEqual(sync.synced, 2)
        sync.wait(sync.commit())  # one more commit, alone: one more sync
        self.assertEqual(sync.synced, 3)

    def test_a_sync_waits_for_writers_under_way_and_covers_their_commits(self) -> None:
        sync = self.sync
        calls = []
        sync.begin()  # another writer is in its transaction
        with (
            mock.patch.object(group_sync, "GATHER_SECONDS", 10),
            mock.patch.object(group_sync.os, "fsync", side_effect=lambda descriptor: calls.append(sync.committed)),
        ):
            first = sync.commit()
            time.sleep(0.05)
            self.assertEqual(calls, [])  # waiting for the writer under way
            self.assertEqual(sync.synced, 0)
            second = sync.commit(began=True)  # that writer commits: one sync covers both
            sync.wait(first)
            sync.wait(second)
        self.assertEqual(calls, [2])
        self.assertEqual(sync.synced, 2)

    def test_after_a_shared_sync_the_next_waits_for_commits_with_no_writer_under_way(self) -> None:
        sync = self.sync
        calls = []
        sync.begin()
        with (
            mock.patch.object(group_sync, "GATHER_SECONDS", 10),
            mock.patch.object(group_sync, "GATHER_COMMITS", 2),
            mock.patch.object(group_sync.os, "fsync", side_effect=lambda descriptor: calls.append(sync.committed)),
        ):
            sync.commit()
            sync.wait(sync.commit(began=True))  # one sync covered both: writes come in a stream
            self.assertEqual(calls, [2])
            third = sync.commit()  # no writer under way, yet the sync waits for more commits
            time.sleep(0.05)
            self.assertEqual(calls, [2])
            self.assertEqual(sync.synced, 2)
            fourth = sync.commit()  # GATHER_COMMITS reached: one sync covers both
            sync.wait(third)
            sync.wait(fourth)
        self.assertEqual(calls, [2, 4])

    def test_a_lone_writers_syncs_do_not_wait(self) -> None:
        sync = self.sync
        with mock.patch.object(group_sync, "GATHER_SECONDS", 10), mock.patch("notebook.sqlite.group_sync.os.fsync"):
            started = time.monotonic()
            for _ in range(3):
                sync.wait(sync.commit())  # each sync covers one commit: the next does not linger
            self.assertLess(time.monotonic() - started, 5)
        self.assertEqual(sync.synced, 3)

    def test_a_writer_that_fails_ends_the_wait(self) -> None:
        sync = self.sync
        sync.begin()
        with mock.patch.object(group_sync, "GATHER_SECONDS", 10), mock.patch("notebook.sqlite.group_sync.os.fsync"):
            ticket = sync.commit()
            time.sleep(0.05)
            started = time.monotonic()
            sync.end()  # the writer's transaction failed: nothing more to wait for
            sync.wait(ticket)
            self.assertLess(time.monotonic() - started, 5)
        self.assertEqual(sync.synced, 1)

    def test_a_writer_that_takes_long_delays_the_sync_only_briefly(self) -> None:
        sync = self.sync
        sync.begin()  # and never commits during this test
        with mock.patch.object(group_sync, "GATHER_SECONDS", 0.05), mock.patch("notebook.sqlite.group_sync.os.fsync"):
            started = time.monotonic()
            sync.wait(sync.commit())
        self.assertGreaterEqual(time.monotonic() - started, 0.05)
        self.assertEqual(sync.synced, 1)

    def test_a_failed_sync_fails_the_commits_it_covered_and_later_commits_sync_anew(self) -> None:
        sync = self.sync
        with (
            mock.patch("notebook.sqlite.group_sync.os.fsync", side_effect=[OSError(5, "Input/output error"), None]),
            self.assertLogs("notebook.sqlite.group_sync", "ERROR"),
        ):
            failed = sync.commit()
            with self.assertRaises(OperationalError):
                sync.wait(failed)
            with self.assertRaises(OperationalError):  # asked again: still not acknowledged
                sync.wait(failed)
            sync.wait(sync.commit())
        self.assertEqual((sync.settled, sync.synced), (2, 2))

    def test_a_coroutine_waits_for_the_sync_while_its_event_loop_runs_on(self) -> None:
        sync = self.sync
        inside, release = threading.Event(), threading.Event()

        def fsync(descriptor: int) -> None:
            inside.set()
            release.wait(10)

        async def scenario() -> list[str]:
            ticket = sync.commit()
            waiting = [asyncio.create_task(sync.wait_async(ticket)) for _ in range(3)]
            await asyncio.to_thread(inside.wait, 10)
            await asyncio.sleep(0.05)  # the loop goes on while the sync runs
            states = ["waiting" if not task.done() else "done" for task in waiting]
            release.set()
            await asyncio.wait_for(asyncio.gather(*waiting), 10)
            await sync.wait_async(ticket)  # already synced: returns at once
            return states

        with mock.patch("notebook.sqlite.group_sync.os.fsync", side_effect=fsync):
            self.assertEqual(asyncio.run(scenario()), ["waiting"] * 3)
        self.assertEqual(sync.synced, 1)


@unittest.skipUnless(connection.vendor == "sqlite", "the group sync is SQLite's WAL")
class AwaitedSyncTest(TransactionTestCase):
    """Through the tools' boundary (``run_sync``), a write's worker thread returns right after
    the commit, and the call answers only once the sync is done."""

    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("alice"))

    def save(self, request_id: str) -> Entry:
        return services.entry_save(codex=self.codex, request_id=request_id, data=parse_entry_input({"content": "x"}))

    def test_the_call_answers_after_the_sync_and_its_thread_is_free_before(self) -> None:
        inside, release, returned = threading.Event(), threading.Event(), threading.Event()
        real_fsync = os.fsync

        def fsync(descriptor: int) -> None:
            inside.set()
            release.wait(10)
            real_fsync(descriptor)

        def work() -> Entry:
            try:
                return self.save("r-1")
            finally:
                returned.set()

        async def scenario() -> tuple[bool, bool, Entry]:
            call = asyncio.create_task(run_sync(work))
            thread_done = await asyncio.to_thread(returned.wait, 5)  # before the sync ends
            await asyncio.to_thread(inside.wait, 10)
            await asyncio.sleep(0.05)
            answered_before_sync = call.done()
            release.set()
            return thread_done, answered_before_sync, await asyncio.wait_for(call, 10)

        with mock.patch("notebook.sqlite.group_sync.os.fsync", side_effect=fsync):
            thread_done, answered_before_sync, entry = asyncio.run(scenario())
        self.assertTrue(thread_done)
        self.assertFalse(answered_before_sync)
        self.assertEqual(entry.revision, 1)

    def test_a_call_whose_sync_fails_answers_unavailable_not_its_result(self) -> None:
        with (
            mock.patch("notebook.sqlite.group_sync.os.fsync", side_effect=OSError(5, "Input/output error")),
            self.assertLogs("notebook.sqlite.group_sync", "ERROR"),
            self.assertLogs("mcp_endpoint.results", "WARNING"),
        ):
            result = asyncio.run(run_tool("field_notes_save", lambda: {"entry": entry_dict(self.save("r-1"))}))
        self.assertTrue(result["isError"])
        self.assertIn('"code":"unavailable"', result["content"][0]["text"])

    def test_a_replayed_save_through_the_boundary_waits_for_the_sync_too(self) -> None:
        self.save("r-1")
        with mock.patch("notebook.sqlite.group_sync.os.fsync", wraps=os.fsync) as fsync:
            entry = asyncio.run(run_sync(lambda: self.save("r-1")))
        self.assertEqual(entry.revision, 1)
        self.assertEqual(fsync.call_count, 1)


@unittest.skipUnless(connection.vendor == "sqlite", "the writer connection is SQLite's")
class WriterConnectionTest(TransactionTestCase):
    """Every write transaction of the process runs on one connection per database file (its
    page cache survives the commits), and each thread gets its own connection back."""

    def write_from_threads(self, count: int) -> list[object]:
        """The driver connection each write ran on (kept, so no id is reused)."""
        seen, errors = [], []

        def write() -> None:
            try:
                own = connections[DEFAULT_DB_ALIAS]
                with write_transaction():
                    seen.append(connection.connection)
                    self.assertIsNot(connections[DEFAULT_DB_ALIAS], own)
                    get_user_model().objects.create_user(f"u{uuid.uuid4().hex}")
                self.assertIs(connections[DEFAULT_DB_ALIAS], own)
            except Exception as error:
                errors.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=write) for _ in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        self.assertEqual(errors, [])
        return seen

    def test_writes_of_every_thread_share_one_connection(self) -> None:
        # Kept between writes as between requests: the tests' CONN_MAX_AGE is 0.
        with mock.patch.dict(connection.settings_dict, {"CONN_MAX_AGE": 60}):
            files.file_of(connection).connection.close()
            seen = self.write_from_threads(4)
        self.assertEqual(len(seen), 4)
        self.assertEqual(len({id(raw) for raw in seen}), 1)
        self.assertEqual(get_user_model().objects.count(), 4)

    def test_a_watched_connection_writes_on_itself(self) -> None:
        own = connections[DEFAULT_DB_ALIAS]
        with CaptureQueriesContext(connection) as captured, write_transaction():
            self.assertIs(connections[DEFAULT_DB_ALIAS], own)
            get_user_model().objects.create_user("watched")
        self.assertTrue(any("INSERT" in query["sql"] for query in captured))

    def test_an_unusable_writer_connection_is_replaced(self) -> None:
        first = self.write_from_threads(1)
        writer = files._files[str(connection.settings_dict["NAME"])].connection
        writer.errors_occurred = True
        with mock.patch.object(type(writer), "is_usable", return_value=False):
            second = self.write_from_threads(1)
        self.assertIsNot(first[0], second[0])
        self.assertEqual(get_user_model().objects.count(), 2)
