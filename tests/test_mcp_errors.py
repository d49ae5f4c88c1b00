"""The tool boundary: whatever goes wrong inside, the client gets a contract error, never internals."""

import dataclasses
import threading
import time
from unittest import mock

from django.db import OperationalError, connection
from django.test import override_settings

from mcp_endpoint.tools import TOOLS_BY_NAME
from tests.base import GrantTestCase, on_postgres
from tests.http_client import call_tool
from tests.live import LiveServerTestCase


def failing(name: str, error: Exception):
    """Patch the tool ``name`` so that its adapter raises ``error``."""
    tool = dataclasses.replace(TOOLS_BY_NAME[name], adapter=mock.Mock(side_effect=error))
    return mock.patch.dict(TOOLS_BY_NAME, {name: tool})


class ToolBoundaryTest(GrantTestCase):
    def test_an_unexpected_exception_is_internal_without_its_text(self) -> None:
        boom = RuntimeError("SELECT secret FROM /etc/passwd")
        with failing("field_notes_search", boom):
            with self.assertLogs("mcp_endpoint.results", "ERROR") as logged:
                error = self.call_error("field_notes_search", {})
        self.assertEqual(error["code"], "internal")
        self.assertNotIn("secret", error["message"])
        self.assertNotIn("passwd", error["message"])
        reference = error["message"].split("reference ")[1].rstrip(")")
        self.assertIn(reference, logged.output[0])  # the operator can find it in the log

    def test_a_database_outage_is_unavailable(self) -> None:
        outage = OperationalError("could not connect to server: Connection refused")
        with (
            failing("field_notes_get", outage),
            self.assertLogs("mcp_endpoint.results", "WARNING"),
        ):
            error = self.call_error("field_notes_get", {"id": "11111111-1111-4111-8111-111111111111"})
        self.assertEqual(error["code"], "unavailable")
        self.assertNotIn("Connection refused", error["message"])


class TokenCheckOutageTest(LiveServerTestCase):
    def test_a_database_outage_during_the_token_check_is_503_not_500(self) -> None:
        token = self.token_for(self.make_user("alice"))
        with (
            # The request's check (the tool handler's, or the guard's) logs the outage.
            mock.patch("mcp_endpoint.auth.check_token_checksum", side_effect=OperationalError("db down")),
            self.assertLogs("mcp_endpoint", "WARNING"),
        ):
            response = call_tool(self.mcp_url, token, "field_notes_search", {})
        self.assertEqual(response.status_code, 503)
        self.assertNotIn("db down", response.text)
        self.assertEqual(response.headers["retry-after"], "5")


class DeadlineTest(GrantTestCase):
    """On PostgreSQL a tool call's database work has a deadline (CODEX_CALL_DEADLINE_SECONDS):
    whatever it waits for (a host whose answers are lost, connection attempts one after the
    other, a commit waiting for a standby), the client gets `unavailable` before its own
    timeout instead of no answer. try_network.sh saw one call wait past the client's 30 s."""

    def test_work_still_waiting_at_the_deadline_answers_unavailable(self) -> None:
        if not on_postgres():
            self.skipTest("the deadline is PostgreSQL's (SQLite's writers wait on their own busy timeout)")
        released = threading.Event()
        # Let go well after the deadline: without it the call answers success then.
        timer = threading.Timer(3, released.set)
        timer.start()
        self.addCleanup(timer.cancel)
        held: list[int] = []  # the stuck worker's database session

        def stuck(*args, **kwargs):
            held.append(connection.connection.info.backend_pid)
            released.wait(30)
            return {"entries": []}

        # The worker thread outlives the call, holding the session its token check opened: the
        # test ends only once the worker has let go of it, else it is still connected when the
        # test database is dropped (a worker is the boundary's, not the call's).
        self.addCleanup(self.wait_until_closed, held)
        self.addCleanup(released.set)

        tool = dataclasses.replace(TOOLS_BY_NAME["field_notes_search"], adapter=stuck)
        with (
            mock.patch.dict(TOOLS_BY_NAME, {"field_notes_search": tool}),
            override_settings(CODEX_CALL_DEADLINE_SECONDS=1),
            self.assertLogs("mcp_endpoint.results", "WARNING") as logged,
        ):
            error = self.call_error("field_notes_search", {})
        self.assertEqual(error["code"], "unavailable")
        self.assertIn("did not answer within 1 s", "\n".join(logged.output))

    def wait_until_closed(self, sessions: list[int]) -> None:
        for _ in range(3000):
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [sessions])
                if not cursor.fetchone()[0]:
                    return
            time.sleep(0.01)
        self.fail(f"the stuck worker still holds its database session {sessions} after 30 s")
