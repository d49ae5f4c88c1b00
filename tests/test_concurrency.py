"""Real concurrency: threads, each with its own connection, released together.

On PostgreSQL this exercises the unique-constraint collision and the row lock; on SQLite
(a file test database) it shows IMMEDIATE transactions and the busy timeout make writers
queue instead of failing with "database is locked".
"""

import threading
import unittest
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import TransactionTestCase

from notebook import services
from notebook.exceptions import Conflict
from notebook.models import Entry, EntryRevision, RequestKey
from notebook.validation import parse_entry_input

WORKERS = 20


def run_together(worker: Callable[[], Any], count: int = WORKERS) -> list[Any]:
    """Start ``count`` threads that all call ``worker`` at the same moment; return results or exceptions."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = worker()
        except Exception as exc:
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@unittest.skipIf(
    connection.vendor == "sqlite"
    and connection.creation.is_in_memory_db(connection.settings_dict["TEST"]["NAME"] or ""),
    "an in-memory SQLite database has no concurrent connections",
)
class ConcurrencyTest(TransactionTestCase):
    def setUp(self) -> None:
        self.user = get_user_model().objects.create_user("carol")
        self.codex = services.codex_for_user(user=self.user)

    def test_concurrent_identical_saves_create_one_entry_and_all_return_it(self) -> None:
        data = parse_entry_input({"content": "once only", "tags": ["race"]})
        results = run_together(lambda: services.entry_save(codex=self.codex, request_id="same", data=data))
        errors = [r for r in results if isinstance(r, Exception)]
        self.assertEqual(errors, [])
        self.assertEqual(len({entry.id for entry in results}), 1)
        self.assertEqual(Entry.objects.filter(codex=self.codex).count(), 1)
        self.assertEqual(RequestKey.objects.filter(codex=self.codex).count(), 1)
        self.assertEqual(EntryRevision.objects.count(), 1)

    def test_concurrent_updates_with_the_same_revision_give_one_success(self) -> None:
        entry = services.entry_save(codex=self.codex, request_id="r", data=parse_entry_input({"content": "v1"}))

        counter = iter(range(WORKERS))
        lock = threading.Lock()

        def update() -> Entry:
            with lock:
                n = next(counter)
            return services.entry_update(
                codex=self.codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": f"v{n}"})
            )

        results = run_together(update)
        successes = [r for r in results if isinstance(r, Entry)]
        conflicts = [r for r in results if isinstance(r, Conflict)]
        self.assertEqual((len(successes), len(conflicts)), (1, WORKERS - 1), results)
        entry.refresh_from_db()
        self.assertEqual(entry.revision, 2)
        self.assertEqual(entry.content, successes[0].content)
        self.assertEqual(EntryRevision.objects.filter(entry=entry, revision=2).count(), 1)
        self.assertEqual(EntryRevision.objects.filter(entry=entry).count(), 2)

    def test_concurrent_first_calls_create_one_codex(self) -> None:
        dave = get_user_model().objects.create_user("dave")
        results = run_together(lambda: services.codex_for_user(user=dave), count=10)
        self.assertEqual(len({codex.pk for codex in results if not isinstance(codex, Exception)}), 1)
        self.assertEqual([r for r in results if isinstance(r, Exception)], [])
