"""The ``default`` cache (``common.durable_cache``): no write, however many, evicts a live entry;
expired rows are swept within ``SWEEP_SECONDS`` of expiring, by a write; a write costs no count of
the table, however large it is; past ``MAX_ENTRIES`` it refuses nothing and says so in the log; a
write or a read the database refuses raises."""

import time
from types import SimpleNamespace
from unittest import mock

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, OperationalError, connection, transaction
from django.test import TestCase, override_settings
from django.test.utils import CaptureQueriesContext

from common import durable_cache
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
