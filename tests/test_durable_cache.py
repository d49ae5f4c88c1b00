"""The ``default`` cache (``common.durable_cache``): no write, however many, evicts a live entry;
expired rows are swept; a write or a read the database refuses raises."""

from django.conf import settings
from django.core.cache import cache
from django.db import DatabaseError, OperationalError, connection, transaction
from django.test import TestCase, override_settings

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

    def test_past_its_row_limit_a_write_sweeps_the_expired_rows_and_only_them(self) -> None:
        for number in range(20):
            cache.set(f"live-{number:02}", number, timeout=600)
        for number in range(30):
            cache.set(f"gone-{number:02}", number, timeout=-1)  # expired at once, never read again
        self.assertEqual(rows(), 21)  # the twenty live ones, and the expired one written last
        self.assertEqual(len(cache.get_many([f"live-{number:02}" for number in range(20)])), 20)

    def test_add_answers_false_for_a_key_already_held(self) -> None:
        self.assertTrue(cache.add("once", 1, timeout=600))
        self.assertFalse(cache.add("once", 2, timeout=600))
        self.assertEqual(cache.get("once"), 1)


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
