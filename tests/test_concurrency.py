"""Real concurrency: threads, each with its own connection, released together.

On PostgreSQL this exercises the unique-constraint collision, the row locks and the quota's
conditional update, in the one statement each save and update is there
(``notebook.sql.writes``); on SQLite (a file test database) it shows IMMEDIATE transactions
and the write queue make writers queue instead of failing with "database is locked". The
Makefile runs this module again with ``CODEX_FAST_PATH=0`` (the plain ORM).
"""

import itertools
import threading
import unittest
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.test import TransactionTestCase, override_settings

from notebook import quotas, selectors, services
from notebook.exceptions import Conflict, NotFound, ResourceExhausted
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag, RequestKey
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


def numbered(worker: Callable[[int], Any]) -> Callable[[], Any]:
    """A worker for ``run_together`` that calls ``worker`` with a number of its own (0, 1, ...)."""
    numbers = itertools.count()
    lock = threading.Lock()

    def call() -> Any:
        with lock:
            number = next(numbers)
        return worker(number)

    return call


def usage(codex: Codex) -> tuple[int, int, int]:
    """(entries, stored bytes, last write number) the codex row holds."""
    return Codex.objects.filter(pk=codex.pk).values_list("entry_count", "stored_bytes", "last_write_seq").get()


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

    def test_concurrent_saves_reusing_a_request_id_with_other_input_make_one_entry_and_conflicts(self) -> None:
        results = run_together(
            numbered(
                lambda n: services.entry_save(
                    codex=self.codex, request_id="same", data=parse_entry_input({"content": f"input {n}"})
                )
            )
        )
        successes = [r for r in results if isinstance(r, Entry)]
        conflicts = [r for r in results if isinstance(r, Conflict)]
        self.assertEqual((len(successes), len(conflicts)), (1, WORKERS - 1), results)
        (stored,) = Entry.objects.filter(codex=self.codex)
        self.assertEqual((stored.id, stored.content), (successes[0].id, successes[0].content))
        self.assertEqual(RequestKey.objects.filter(codex=self.codex).count(), 1)
        self.assertEqual(EntryRevision.objects.filter(codex=self.codex).count(), 1)
        # Only the winner's charge stays: the losers' statements (or transactions) wrote nothing.
        self.assertEqual(usage(self.codex), (1, len(stored.content), 1))

    def test_concurrent_saves_take_each_write_number_once(self) -> None:
        results = run_together(
            numbered(
                lambda n: services.entry_save(
                    codex=self.codex, request_id=f"r{n}", data=parse_entry_input({"content": "x", "tags": [f"t{n}"]})
                )
            )
        )
        self.assertEqual([r for r in results if isinstance(r, Exception)], [])
        numbers = sorted(Entry.objects.filter(codex=self.codex).values_list("write_seq", flat=True))
        self.assertEqual(numbers, list(range(1, WORKERS + 1)))
        self.assertEqual(sorted(entry.write_seq for entry in results), numbers)
        self.assertEqual(usage(self.codex), (WORKERS, sum(len(f"xt{n}") for n in range(WORKERS)), WORKERS))
        self.assertEqual(EntryTag.objects.filter(codex=self.codex).count(), WORKERS)

    def test_updates_racing_in_turn_number_every_revision_once_and_keep_the_index_exact(self) -> None:
        entry = services.entry_save(
            codex=self.codex, request_id="r", data=parse_entry_input({"content": "v", "tags": ["shared"]})
        )
        workers, rounds = 8, 3

        def update_in_turn(n: int) -> list[int]:
            """``rounds`` successful updates, each expecting the revision just read (a
            conflict means another thread got there first: read again and retry)."""
            made: list[int] = []
            for attempt in itertools.count():
                if len(made) == rounds or attempt > 1_000:
                    return made
                seen = selectors.entry_get(codex=self.codex, entry_id=entry.id).revision
                tags = [f"w{n}", "shared"] if attempt % 2 else ["shared", f"r{attempt}"]
                data = parse_entry_input({"content": f"{n}.{attempt}", "tags": tags, "relatedAgentIds": [f"a{n}"]})
                try:
                    updated = services.entry_update(
                        codex=self.codex, entry_id=entry.id, expected_revision=seen, data=data
                    )
                except Conflict:
                    continue
                made.append(updated.revision)
            raise AssertionError("unreachable")

        results = run_together(numbered(update_in_turn), count=workers)
        last = 1 + workers * rounds
        # Each update took exactly one revision number: none lost, none applied twice.
        self.assertEqual(sorted(revision for made in results for revision in made), list(range(2, last + 1)), results)
        entry.refresh_from_db()
        self.assertEqual((entry.revision, entry.write_seq), (last, last))
        self.assertEqual(
            list(EntryRevision.objects.filter(entry=entry).order_by("revision").values_list("revision", flat=True)),
            list(range(1, last + 1)),
        )
        # The index rows are exactly the entry's last tags and agents.
        self.assertEqual(
            sorted(EntryTag.objects.filter(entry=entry).values_list("value", flat=True)), sorted(entry.tags)
        )
        self.assertEqual(
            list(EntryRelatedAgent.objects.filter(entry=entry).values_list("value", flat=True)),
            entry.related_agent_ids,
        )
        stored = quotas.revisions_bytes(EntryRevision.objects.filter(codex=self.codex))
        self.assertEqual(usage(self.codex), (1, stored, last))

    def test_concurrent_updates_at_the_byte_quota_are_charged_exactly(self) -> None:
        entries = [
            services.entry_save(codex=self.codex, request_id=f"r{n}", data=parse_entry_input({"content": "x"}))
            for n in range(WORKERS)
        ]
        # Room for exactly three more revisions of two bytes.
        with override_settings(CODEX_QUOTA_STORED_BYTES=WORKERS + 3 * 2):
            results = run_together(
                numbered(
                    lambda n: services.entry_update(
                        codex=self.codex,
                        entry_id=entries[n].id,
                        expected_revision=1,
                        data=parse_entry_input({"content": "yy"}),
                    )
                )
            )
        successes = [r for r in results if isinstance(r, Entry)]
        refused = [r for r in results if isinstance(r, ResourceExhausted)]
        self.assertEqual((len(successes), len(refused)), (3, WORKERS - 3), results)
        for error in refused:
            self.assertIn("this write of 2 bytes would pass its quota of", error.message)
        self.assertEqual(usage(self.codex), (WORKERS, WORKERS + 6, WORKERS + 3))
        # A refused update wrote nothing: its entry is still at revision 1.
        revisions = dict(Entry.objects.filter(codex=self.codex).values_list("id", "revision"))
        self.assertEqual(sorted(revisions.values()), [1] * (WORKERS - 3) + [2] * 3)
        self.assertEqual({entry.id for entry in successes}, {key for key, value in revisions.items() if value == 2})
        self.assertEqual(EntryRevision.objects.filter(codex=self.codex).count(), WORKERS + 3)

    def test_updates_racing_a_delete_leave_no_rows_behind(self) -> None:
        data = parse_entry_input({"content": "v1", "tags": ["t"], "relatedAgentIds": ["a"]})
        entry = services.entry_save(codex=self.codex, request_id="r", data=data)

        def work(n: int) -> Any:
            if n == 0:
                return services.entry_delete(codex=self.codex, entry_id=entry.id)
            return services.entry_update(
                codex=self.codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": f"v{n}"})
            )

        results = run_together(numbered(work))
        updated = [r for r in results if isinstance(r, Entry)]
        self.assertLessEqual(len(updated), 1, results)
        self.assertEqual(results.count(None), 1, results)  # the delete
        self.assertEqual([r for r in results if not isinstance(r, Entry | Conflict | NotFound | None)], [])
        for model in (Entry, EntryRevision, EntryTag, EntryRelatedAgent, RequestKey):
            self.assertFalse(model.objects.filter(codex=self.codex).exists(), model)
        # Whether an update came before the delete or after it, the usage is given back whole.
        self.assertEqual(usage(self.codex)[:2], (0, 0))

    def test_concurrent_first_calls_create_one_codex(self) -> None:
        dave = get_user_model().objects.create_user("dave")

        def first_call() -> Codex:
            # Each call with its own user, read afresh, as each tool call's token check reads it:
            # one instance shared by the threads would hand one thread another's unsaved codex
            # through the instance's cache of user.codex.
            return services.codex_for_user(user=get_user_model().objects.get(pk=dave.pk))

        results = run_together(first_call, count=10)
        self.assertEqual(len({codex.pk for codex in results if not isinstance(codex, Exception)}), 1)
        self.assertEqual([r for r in results if isinstance(r, Exception)], [])
