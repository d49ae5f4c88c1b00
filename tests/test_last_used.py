"""Connected applications shows when each application last called a tool, to the minute,
without a write per tool call: each process writes a person and application's minute at
most once (authserver.core.last_used), on a test clock here."""

import datetime as dt
from unittest import mock

from django.db import DatabaseError, connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext

from authserver.core import last_used
from authserver.models import ClientUse
from tests.base import connect_application
from tests.http_client import call_tool
from tests.live import LiveServerTestCase

NOON = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC).timestamp()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def writes(queries: CaptureQueriesContext) -> int:
    return sum(1 for query in queries.captured_queries if "authserver_clientuse" in query["sql"])


class CoalescingTest(TestCase):
    def setUp(self) -> None:
        from django.contrib.auth import get_user_model

        self.alice = get_user_model().objects.create_user("alice")
        self.application, _ = connect_application(self.alice, "desk")
        self.clock = Clock(NOON + 5)
        self.uses = last_used.LastUsed(clock=self.clock)

    def test_a_thousand_calls_in_one_minute_write_once_and_the_next_minute_once_more(self) -> None:
        with CaptureQueriesContext(connection) as queries:
            for second in range(1000):
                self.clock.now = NOON + 5 + second * 0.05
                self.uses.touch(self.alice.pk, self.application.pk)
        self.assertGreater(writes(queries), 0)
        first = writes(queries)
        self.assertLessEqual(first, 3)  # an UPDATE that found nothing, a look, the INSERT: once
        self.assertEqual(ClientUse.objects.get().last_used, dt.datetime.fromtimestamp(NOON, tz=dt.UTC))
        self.clock.now = NOON + 61
        with CaptureQueriesContext(connection) as queries:
            for _ in range(1000):
                self.uses.touch(self.alice.pk, self.application.pk)
        self.assertEqual(writes(queries), 1)  # one UPDATE
        self.assertEqual(ClientUse.objects.get().last_used, dt.datetime.fromtimestamp(NOON + 60, tz=dt.UTC))

    def test_a_minute_never_goes_back(self) -> None:
        self.clock.now = NOON + 125
        self.uses.touch(self.alice.pk, self.application.pk)
        other_process = last_used.LastUsed(clock=Clock(NOON + 5))
        other_process.touch(self.alice.pk, self.application.pk)
        self.assertEqual(ClientUse.objects.get().last_used, dt.datetime.fromtimestamp(NOON + 120, tz=dt.UTC))

    def test_a_failed_write_never_fails_the_call_and_the_next_call_tries_again(self) -> None:
        with mock.patch.object(last_used, "record_use", side_effect=DatabaseError("away")):
            self.uses.touch(self.alice.pk, self.application.pk)
        self.assertFalse(ClientUse.objects.exists())
        self.uses.touch(self.alice.pk, self.application.pk)
        self.assertTrue(ClientUse.objects.exists())

    def test_a_token_without_an_application_records_nothing(self) -> None:
        self.uses.touch(self.alice.pk, None)
        self.assertFalse(ClientUse.objects.exists())


class ConnectedApplicationsShowLastUseTest(LiveServerTestCase):
    def test_a_tool_call_shows_on_the_page_to_the_minute(self) -> None:
        alice = self.make_user("alice")
        _, token = connect_application(alice, "Desk assistant")
        last_used.LAST_USED.forget()
        self.addCleanup(last_used.LAST_USED.forget)
        with mock.patch.object(last_used.LAST_USED, "clock", Clock(NOON + 42)):
            self.client.force_login(alice)
            self.assertContains(self.client.get("/account/clients/"), "no tool call yet")
            for _ in range(3):
                self.assertEqual(call_tool(self.mcp_url, token, "field_notes_search", {}).status_code, 200)
        page = self.client.get("/account/clients/")
        self.assertContains(page, "2026-11-30 12:00 UTC")
        self.assertEqual(ClientUse.objects.count(), 1)
