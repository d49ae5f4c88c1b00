"""The search index's SQLite triggers are checked at the head of the migrations: a missing one
is a system check warning, and ``migrate`` makes it again (notebook.sqlite.triggers)."""

import io
import unittest

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import TransactionTestCase

from notebook import selectors, services
from notebook.models import Codex
from notebook.sqlite import triggers
from notebook.sqlite.triggers import check_triggers, missing_triggers
from notebook.validation import parse_entry_input, parse_search_params


@unittest.skipUnless(connection.vendor == "sqlite", "SQLite's search index triggers")
class TriggersTest(TransactionTestCase):
    def drop(self, name: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP TRIGGER {name}")
        self.addCleanup(triggers.repair_triggers)

    def test_every_trigger_is_there_after_the_migrations(self) -> None:
        self.assertEqual(missing_triggers(), [])
        self.assertEqual(check_triggers(None, databases=["default"]), [])

    def test_a_dropped_trigger_is_reported_and_migrate_makes_it_again(self) -> None:
        self.drop("notebook_entry_trigram_insert")
        errors = check_triggers(None, databases=["default"])
        self.assertEqual([error.id for error in errors], ["notebook.W001"])
        self.assertIn("notebook_entry_trigram_insert", errors[0].msg)

        with self.assertLogs("notebook.sqlite.triggers", "WARNING"):
            # As ``manage.py migrate`` runs it: the database checks first, which only warn.
            call_command("migrate", verbosity=0, skip_checks=False, stderr=io.StringIO())
        self.assertEqual(missing_triggers(), [])
        # The remade trigger works: more than a batch of saves reach the FTS5 table.
        User = get_user_model()
        codex = Codex.objects.create(owner=User.objects.create(username="trigger-test"))
        for number in range(40):
            services.entry_save(
                codex=codex, request_id=f"r{number}", data=parse_entry_input({"content": f"word{number} here"})
            )
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM notebook_entry_trigram_key")
            self.assertEqual(cursor.fetchone()[0], 40)
        page = selectors.entry_search(codex=codex, params=parse_search_params(query="word39"))
        self.assertEqual(len(page.entries), 1)
