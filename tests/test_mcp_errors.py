"""The tool boundary: whatever goes wrong inside, the client gets a contract error, never internals."""

import dataclasses
from unittest import mock

from django.db import OperationalError

from mcp_endpoint.tools import TOOLS_BY_NAME
from tests.base import GrantTestCase
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
            # Whoever checks (the guard or, for a single call, the tool handler) logs the outage.
            mock.patch("mcp_endpoint.auth.check_token_checksum", side_effect=OperationalError("db down")),
            self.assertLogs("mcp_endpoint", "WARNING"),
        ):
            response = call_tool(self.mcp_url, token, "field_notes_search", {})
        self.assertEqual(response.status_code, 503)
        self.assertNotIn("db down", response.text)
        self.assertEqual(response.headers["retry-after"], "5")
