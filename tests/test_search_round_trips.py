"""Round trips to PostgreSQL per query search page, counted in libpq's own trace of the protocol
(``tests.test_round_trips``): a word the sample finds rare costs the sample and the trigram
step, whose planner settings (``prefilters.PG_BITMAP_ONLY``) travel with its statement."""

import unittest

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test import TransactionTestCase, override_settings

from notebook import services
from notebook.models import Codex, Entry
from notebook.prefilters import PG_BITMAP_ONLY
from notebook.sql.search import _bitmap_only
from notebook.validation import parse_entry_input
from tests.test_selectors_search import follow, search
from tests.wire import round_trips

SETTINGS = "SELECT " + ", ".join(f"current_setting('{name}')" for name in PG_BITMAP_ONLY)


def planner_settings() -> tuple[str, ...]:
    with connection.cursor() as cursor:
        cursor.execute(SETTINGS)
        return tuple(cursor.fetchone())


@unittest.skipUnless(
    connection.vendor == "postgresql" and settings.CODEX_FAST_PATH, "the fast path's round trips to a PostgreSQL server"
)
class RareWordRoundTripsTest(TransactionTestCase):
    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("carol"))
        for number in range(6):
            content = f"note {number}" + (" with a wombat" if number in (2, 4) else "")
            data = parse_entry_input({"content": content})
            services.entry_save(codex=self.codex, request_id=f"r{number}", data=data)
        # A codex the plan takes for 10,000 entries: a sample of 100, which finds at most the
        # two, so the rest of the page comes from the trigram step.
        Codex.objects.filter(pk=self.codex.pk).update(entry_count=10_000)
        self.codex.refresh_from_db()
        holders = Entry.objects.filter(codex=self.codex, content__contains="wombat")
        self.holders = list(holders.order_by("id").values_list("id", flat=True))
        self.defaults = planner_settings()

    def page(self) -> list:
        return [entry.id for entry in search(self.codex, query="wombat", limit=20).entries]

    def test_a_rare_word_is_the_sample_and_the_trigram_step_in_one_round_trip_each(self) -> None:
        self.assertEqual(round_trips(self.page), 2)
        self.assertEqual(self.page(), self.holders)
        self.assertEqual(planner_settings(), self.defaults)

    def test_inside_a_transaction_too_and_the_settings_are_undone(self) -> None:
        with transaction.atomic():
            connection.ensure_connection()
            planner_settings()  # the transaction begun, so BEGIN is not counted below
            self.assertEqual(round_trips(self.page), 2)
            self.assertEqual(self.page(), self.holders)
            self.assertEqual(planner_settings(), self.defaults)
            # Following the cursor: the same entries as the plain ORM lists.
            self.assertEqual(follow(self.codex, query="wombat", limit=1)[0], self.holders)
        with override_settings(CODEX_FAST_PATH=False):
            self.assertEqual(follow(self.codex, query="wombat", limit=1)[0], self.holders)

    def test_the_settings_hold_for_the_statement_they_travel_with(self) -> None:
        bitmap_only = tuple(PG_BITMAP_ONLY.values())
        self.assertEqual(tuple(_bitmap_only(connection, SETTINGS, [])[0]), bitmap_only)
        self.assertEqual(planner_settings(), self.defaults)
        with transaction.atomic():
            self.assertEqual(tuple(_bitmap_only(connection, SETTINGS, [])[0]), bitmap_only)
            self.assertEqual(planner_settings(), self.defaults)
        self.assertNotEqual(self.defaults, bitmap_only)

    def test_the_trigram_step_is_never_compiled_by_jit(self) -> None:
        # A word common in other codexes makes the step's estimated cost pass jit_above_cost
        # on a large server; here every statement's does.
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_jit_available()")
            if not cursor.fetchone()[0]:
                self.skipTest("this PostgreSQL server has no JIT")
            cursor.execute("SET jit_above_cost = 0")
        self.addCleanup(lambda: connection.cursor().execute("RESET jit_above_cost"))
        explain = "EXPLAIN (ANALYZE, FORMAT JSON) SELECT count(*) FROM notebook_entry WHERE codex_id = %s"
        with connection.cursor() as cursor:
            cursor.execute(explain, [self.codex.pk])
            self.assertIn("JIT", cursor.fetchone()[0][0])  # compiled, outside the step
        self.assertNotIn("JIT", _bitmap_only(connection, explain, [self.codex.pk])[0][0][0])
