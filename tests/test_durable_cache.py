"""The ``default`` cache (``common.durable_cache``): no write, however many, evicts a live entry;
expired rows are swept within ``SWEEP_SECONDS`` of expiring, by a write; a write costs no count of
the table, however large it is; past ``MAX_ENTRIES`` it refuses nothing and says so in the log; a
write or a read the database refuses raises; ``incr`` loses no count to another at the same moment
(real threads, each with its own connection, on both databases) and keeps the entry's expiry."""

import threading
import time
from types import SimpleNamespace
from unittest import mock

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, OperationalError, connection, connections, transaction
from django.test import TestCase, TransactionTestCase, override_settings
from django.test.utils import CaptureQueriesContext

from common import durable_cache, ratelimit
from tests.base import on_postgres
from tests.test_concurrency import run_together
from tests.test_ratelimit_outage import DROP, TRIGGERS

SMALL = {**settings.CACHES, "default": {**settings.CACHES["default"], "OPTIONS": {"MAX_ENTRIES": 20}}}


def rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM codex_cache")
        return cursor.fetchone()[0]


@override_settings(CACHES=SMALL)
class NeverEvictsTest(TestCase):
    def test_ten_times_its_row_limit_of_live_entries_are_all_kept(self) -> None:
        for number in range(200):
            cache.set(f"entry-{number:03}", number, timeout=600)
        self.assertEqual(rows(), 200)
        self.assertEqual(
            cache.get_many([f"entry-{number:03}" for number in range(200)]), {f"entry-{n:03}": n for n in range(200)}
        )

    def test_a_write_sweeps_the_expired_rows_and_only_them_once_the_sweep_is_due(self) -> None:
        clock = Clock()
        with clock.patch():
            cache.set("first", 0, timeout=600)  # this process's first write sweeps
            for number in range(5):
                cache.set(f"live-{number:02}", number, timeout=600)
            for number in range(8):
                cache.set(f"gone-{number:02}", number, timeout=-1)  # expired at once, never read again
            self.assertEqual(rows(), 14)  # far below the row limit, and not yet swept
            clock.advance(durable_cache.SWEEP_SECONDS)
            cache.set("later", 1, timeout=600)
        self.assertEqual(rows(), 7)  # the live ones, "first" and "later"
        self.assertEqual(len(cache.get_many([f"live-{number:02}" for number in range(5)])), 5)

    def test_a_write_costs_no_count_of_the_table(self) -> None:
        # Django's database cache counts every row on every write (SELECT COUNT(*)): on a table a
        # flood made large, every sign-in's writes paid for it.
        with Clock().patch(), CaptureQueriesContext(connection) as statements:
            cache.set("first", 0, timeout=600)  # the sweep, due in this process: it counts once
            cache.set("counter", 1, timeout=600)
            cache.add("once", 1, timeout=600)
            cache.incr("counter")
            cache.touch("counter", 600)
        counts = [query["sql"] for query in statements.captured_queries if "COUNT(" in query["sql"].upper()]
        self.assertEqual(len(counts), 1, counts)

    def test_past_its_row_limit_every_live_entry_is_kept_nothing_is_refused_and_the_log_says_so(self) -> None:
        clock = Clock()
        with clock.patch(), self.assertLogs("common.durable_cache", "WARNING") as logs:
            for number in range(30):
                cache.set(f"entry-{number:02}", number, timeout=600)
            clock.advance(durable_cache.SWEEP_SECONDS)
            self.assertTrue(cache.add("one-more", 1, timeout=600))
        self.assertEqual(rows(), 31)
        [line] = logs.output
        self.assertIn("30 live entries", line)  # counted as the write came, before it
        self.assertIn("MAX_ENTRIES of 20", line)

    def test_add_answers_false_for_a_key_already_held_and_takes_an_expired_ones_place(self) -> None:
        self.assertTrue(cache.add("once", 1, timeout=600))
        self.assertFalse(cache.add("once", 2, timeout=600))
        self.assertEqual(cache.get("once"), 1)
        cache.set("stale", 1, timeout=-1)
        self.assertTrue(cache.add("stale", 2, timeout=600))
        self.assertEqual(cache.get("stale"), 2)

    def test_touch_and_incr_keep_their_meaning(self) -> None:
        self.assertFalse(cache.touch("absent", 600))
        cache.set("n", 1, timeout=600)
        self.assertTrue(cache.touch("n", 600))
        self.assertEqual(cache.incr("n", 2), 3)
        self.assertEqual(cache.get("n"), 3)
        self.assertEqual(cache.decr("n"), 2)
        with self.assertRaises(ValueError):
            cache.incr("absent")
        cache.set("stale", 1, timeout=-1)
        with self.assertRaises(ValueError):
            cache.incr("stale")

    def test_incr_keeps_the_entrys_expiry(self) -> None:
        # A counter lives as long as its window; Django's incr wrote it again with the cache's
        # default timeout (300 s), so an hour's counter left alone for five minutes was gone.
        cache.set("window", 1, timeout=3600)
        before = expires_of("window")
        cache.incr("window")
        self.assertEqual(expires_of("window"), before)
        self.assertEqual(cache.get("window"), 2)


def expires_of(key: str):
    with connection.cursor() as cursor:
        cursor.execute("SELECT expires FROM codex_cache WHERE cache_key = %s", [cache.make_and_validate_key(key)])
        return cursor.fetchone()[0]


class Clock:
    """The sweep's clock (``common.durable_cache``), standing still until moved on; each test
    starts with no sweep behind it."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def patch(self):
        durable_cache.forget_sweeps()
        return mock.patch.object(durable_cache, "time", SimpleNamespace(monotonic=lambda: self.now))


class FailsClosedTest(TestCase):
    def refuse_writes(self) -> None:
        with connection.cursor() as cursor:
            for statement in TRIGGERS[connection.vendor]:
                cursor.execute(statement)
        self.addCleanup(self.allow_writes)

    def allow_writes(self) -> None:
        with connection.cursor() as cursor:
            for statement in DROP[connection.vendor]:
                cursor.execute(statement)

    def test_a_refused_write_raises(self) -> None:
        self.refuse_writes()
        for write in (lambda: cache.set("k", 1, 60), lambda: cache.add("k", 1, 60)):
            with self.assertRaisesMessage(OperationalError, "could not be written"):
                write()

    def test_an_unreadable_table_raises(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE codex_cache RENAME TO codex_cache_away")
        try:
            with self.assertRaises(DatabaseError), transaction.atomic():
                cache.get("k")
        finally:
            with connection.cursor() as cursor:
                cursor.execute("ALTER TABLE codex_cache_away RENAME TO codex_cache")


class ConcurrentIncrementsTest(TransactionTestCase):
    """Every rate limit counts through ``incr`` (``common.ratelimit``), from every worker thread
    and process at once. Django's is a read, then a write: two at the same moment read the same
    count and both write it plus one."""

    def setUp(self) -> None:
        cache.clear()
        ratelimit._windows.clear()
        self.addCleanup(ratelimit._windows.clear)

    def test_an_increment_that_waits_for_another_counts_on_top_of_it(self) -> None:
        # The test takes the lock a write needs (SQLite: the database's write lock; PostgreSQL:
        # the counter's row) and lets another thread's incr run into it, then increments the
        # counter itself and lets go. The other thread read the counter before the test's
        # increment was committed; its own must still land on top.
        cache.set("counter", 5, timeout=600)
        waiting = threading.Event()
        answers: list[object] = []

        def note_the_wait(execute, sql, params, many, context):
            if sql.startswith("BEGIN") or sql.startswith(("UPDATE", "INSERT")):
                waiting.set()  # the statement that waits for the test's lock starts now
            return execute(sql, params, many, context)

        def increment() -> None:
            try:
                with connection.execute_wrapper(note_the_wait):
                    answers.append(cache.incr("counter"))
            except Exception as error:  # the test reports it
                answers.append(error)
            finally:
                connections.close_all()

        worker = threading.Thread(target=increment)
        with transaction.atomic():
            if on_postgres():
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT value FROM codex_cache WHERE cache_key = %s FOR UPDATE",
                        [cache.make_and_validate_key("counter")],
                    )
            worker.start()
            self.wait_until_it_waits(worker, waiting)
            self.assertEqual(cache.incr("counter"), 6)
        worker.join(timeout=60)
        self.assertEqual(answers, [7])
        self.assertEqual(cache.get("counter"), 7)

    def wait_until_it_waits(self, worker: threading.Thread, waiting: threading.Event) -> None:
        if not on_postgres():
            # SQLite has no view of who waits: the worker says when its waiting statement starts.
            self.assertTrue(waiting.wait(timeout=60), "the increment never reached its write")
            return
        # pg_locks is read afresh by each statement; bounded, so that a broken lock fails the test.
        for _ in range(6000):
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    return
            if not worker.is_alive():
                self.fail("the increment finished without waiting for the lock the test holds")
            time.sleep(0.01)
        self.fail("the increment did not reach the lock in 60 s")

    def test_twenty_threads_incrementing_at_once_count_every_increment(self) -> None:
        cache.set("counter", 0, timeout=600)

        def ten() -> None:
            for _ in range(10):
                cache.incr("counter")

        results = run_together(ten)
        self.assertEqual([result for result in results if result is not None], [])
        self.assertEqual(cache.get("counter"), 200)

    def test_a_limit_lets_exactly_its_number_through_however_many_come_at_once(self) -> None:
        def attempt() -> bool:
            allowed, _ = ratelimit.allow("probe", "192.0.2.1", limit=7, window_seconds=3600)
            return allowed

        results = run_together(attempt, count=20)
        self.assertEqual([result for result in results if not isinstance(result, bool)], [])
        self.assertEqual(results.count(True), 7)
