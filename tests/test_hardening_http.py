"""Production hardening of the HTTP surface: hostile bodies and ids, GET streams,
health checks and quiet logs while the database is down."""

import contextlib
import io
import logging
from collections.abc import Iterator

import httpx2
from django.db import connections

from common import outage
from notebook.models import Entry
from tests.http_client import LEGACY, MODERN, OLDEST, call_tool, post
from tests.live import LiveServerTestCase

HANDSHAKE = "2025-11-25"
VERSIONS = (OLDEST, LEGACY, HANDSHAKE, MODERN)
ENTRY_ID = "11111111-1111-4111-8111-111111111111"


@contextlib.contextmanager
def database_down() -> Iterator[None]:
    """New connections (the server's worker threads open one per request) fail until the
    block ends; the test thread's open connection keeps working. Every connection object
    shares this settings dict, so the change reaches them all."""
    settings_dict = connections.settings["default"]
    connections["default"].ensure_connection()
    saved = dict(settings_dict)
    if settings_dict["ENGINE"].endswith("sqlite3"):
        settings_dict["NAME"] = "/nonexistent-directory/codex.sqlite3"
    else:
        settings_dict["HOST"], settings_dict["PORT"] = "127.0.0.1", "1"  # nothing listens on port 1
    try:
        yield
    finally:
        settings_dict.clear()
        settings_dict.update(saved)


@contextlib.contextmanager
def captured_logs() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    old_level, old_handlers = root.level, root.handlers[:]
    root.handlers = [handler]  # only here, not on the test run's console
    root.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        root.handlers = old_handlers
        root.setLevel(old_level)


def tracebacks_in(lines: list[str]) -> int:
    """Logged tracebacks; a chained exception's "direct cause" is part of the same one."""
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback")]
    chained = [i for i in starts if i >= 2 and lines[i - 2].startswith(("The above exception", "During handling"))]
    return len(starts) - len(chained)


def deeply_nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


class HostileBodyTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.token = self.token_for(self.make_user("alice"))

    def test_deeply_nested_bodies_get_a_parse_error_in_every_protocol_era(self) -> None:
        bodies = {
            "1,000 bare brackets": b"[" * 1_000,
            "1,000 balanced brackets": deeply_nested(1_000),
            "100,000 brackets": deeply_nested(100_000),
            "nested objects": b'{"a":' * 1_000 + b"1" + b"}" * 1_000,
            "nesting inside a tools/call": b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":'
            + b'{"name":"field_notes_save","arguments":{"requestId":"r","entry":{"content":"c","provenance":{"a":'
            + deeply_nested(1_000)
            + b"}}}}}",
        }
        for version in VERSIONS:
            for label, body in bodies.items():
                for headers in ({}, {"Mcp-Method": "tools/call", "Mcp-Name": "field_notes_save"}):
                    with self.subTest(label, version=version, headers=bool(headers)):
                        response = post(self.mcp_url, token=self.token, content=body, version=version, headers=headers)
                        self.assertEqual(response.status_code, 400, response.text)
                        self.assertEqual(response.json()["error"]["code"], -32700, response.text)
        self.assertEqual(Entry.objects.count(), 0)

    def test_nesting_just_inside_the_parser_limit_is_refused_cleanly(self) -> None:
        # Under the parser's recursion limit the body parses; the arguments then break
        # the provenance depth rule (or the schema) and nothing else.
        for depth in (9, 50, 150, 190):
            provenance: object = {}
            for _ in range(depth - 1):
                provenance = {"n": provenance}
            for version in VERSIONS:
                with self.subTest(depth=depth, version=version):
                    response = call_tool(
                        self.mcp_url,
                        self.token,
                        "field_notes_save",
                        {"requestId": f"deep-{depth}", "entry": {"content": "c", "provenance": provenance}},
                        version=version,
                    )
                    self.assertLess(response.status_code, 500, response.text)
                    self.assertNotIn("Traceback", response.text)
                    if "result" in response.json():
                        self.assertTrue(response.json()["result"]["isError"])
        self.assertEqual(Entry.objects.count(), 0)

    def test_deeply_nested_registration_bodies_get_400(self) -> None:
        for body in (deeply_nested(1_000), b'{"redirect_uris":' + deeply_nested(5_000) + b"}"):
            with self.subTest(size=len(body)):
                response = httpx2.post(
                    self.live.base_url + "/o/register/",
                    content=body,
                    headers={"Content-Type": "application/json"},
                    timeout=30,
                )
                self.assertEqual(response.status_code, 400, response.text[:300])
                self.assertEqual(response.json()["error"], "invalid_client_metadata")

    def test_ids_with_a_trailing_newline_or_other_edges_are_refused_as_bad_arguments(self) -> None:
        bad_ids = [
            ENTRY_ID + "\n",
            ENTRY_ID + "\r\n",
            "\n" + ENTRY_ID,
            ENTRY_ID + " ",
            ENTRY_ID + "\u2028",
            ENTRY_ID[:-1],
            ENTRY_ID + "1",
        ]
        for version in VERSIONS:
            for bad in bad_ids:
                for tool, arguments in (
                    ("field_notes_get", {"id": bad}),
                    ("field_notes_update", {"id": bad, "expectedRevision": 1, "entry": {"content": "c"}}),
                ):
                    with self.subTest(repr(bad), tool=tool, version=version):
                        with self.assertNoLogs("mcp_endpoint", level="ERROR"):
                            reply = call_tool(self.mcp_url, self.token, tool, arguments, version=version).json()
                        self.assertTrue(reply["result"]["isError"], reply)
                        self.assertIn('"code":"invalid_argument"', reply["result"]["content"][0]["text"])

    def test_get_offers_no_stream(self) -> None:
        for accept in ("text/event-stream", "application/json, text/event-stream", "*/*"):
            with self.subTest(accept=accept):
                response = httpx2.get(
                    self.mcp_url,
                    headers={"Accept": accept, "Authorization": f"Bearer {self.token}"},
                    timeout=5,
                )
                self.assertEqual(response.status_code, 405)
                self.assertEqual(response.headers["Allow"], "POST")
        # The path with a slash is the same endpoint: the token first (issue 42), then the 405.
        response = httpx2.get(self.mcp_url + "/", headers={"Accept": "text/event-stream"}, timeout=5)
        self.assertEqual(response.status_code, 401)
        self.assertIn("Bearer", response.headers["WWW-Authenticate"])
        authorized = {"Accept": "text/event-stream", "Authorization": f"Bearer {self.token}"}
        response = httpx2.get(self.mcp_url + "/", headers=authorized, timeout=5)
        self.assertEqual(response.status_code, 405)


class DatabaseOutageTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.token = self.token_for(self.make_user("alice"))
        outage.reset()

    def test_healthz_answers_200_then_503_with_json_while_the_database_is_down(self) -> None:
        response = httpx2.get(self.live.base_url + "/healthz", timeout=10)
        self.assertEqual((response.status_code, response.json()["status"]), (200, "ok"))
        with captured_logs() as logs, database_down():
            response = httpx2.get(self.live.base_url + "/healthz", timeout=10)
        self.assertEqual(response.status_code, 503)
        self.assertEqual(response.headers["Content-Type"], "application/json")
        self.assertEqual(response.json()["status"], "unavailable")
        self.assertIn("Retry-After", response.headers)
        self.assertLess(len(response.content), 200)
        self.assertNotIn("ERROR", logs.getvalue())
        response = httpx2.get(self.live.base_url + "/healthz", timeout=10)
        self.assertEqual(response.status_code, 200)

    def test_an_outage_logs_one_line_per_refused_request_and_one_traceback(self) -> None:
        requests = 0
        with captured_logs() as logs, database_down():
            for _ in range(10):
                for version in (LEGACY, MODERN):
                    response = call_tool(self.mcp_url, self.token, "field_notes_get", {"id": ENTRY_ID}, version=version)
                    self.assertEqual(response.status_code, 503, response.text)
                    requests += 1
                response = httpx2.get(self.live.base_url + "/healthz", timeout=10)
                self.assertEqual(response.status_code, 503)
                response = httpx2.post(
                    self.live.base_url + "/o/token/",
                    data={"grant_type": "authorization_code", "code": "x", "client_id": "x"},
                    timeout=10,
                )
                self.assertEqual(response.status_code, 503, response.text[:300])  # a Django view
                requests += 2
        lines = logs.getvalue().splitlines()
        tracebacks = tracebacks_in(lines)
        refused = [line for line in lines if "database unavailable" in line]
        self.assertEqual(len(refused), requests, "\n".join(lines[:40]))
        self.assertEqual(tracebacks, 1, "\n".join(lines[:80]))
        records = [line for line in lines if line.startswith(("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))]
        # Besides each request's access line (a tool call's with its outcome, unavailable):
        # one line per refusal, nothing else.
        access = [line for line in records if line.startswith("INFO codex.access ")]
        calls = [line for line in access if ": tool call " in line]
        self.assertEqual((len(access), len(calls)), (requests, 20), "\n".join(access))
        self.assertTrue(all(" field_notes_get unavailable " in line for line in calls), "\n".join(calls))
        self.assertEqual(len(records) - len(access), requests, "\n".join(records))
        self.assertFalse([line for line in lines if line.startswith("ERROR")])

    def test_a_tool_call_past_the_http_check_answers_unavailable_with_one_line(self) -> None:
        from unittest import mock

        from django.db import OperationalError

        with (
            captured_logs() as logs,
            mock.patch("notebook.selectors.entry_get", side_effect=OperationalError("connection refused")),
        ):
            for _ in range(5):
                reply = call_tool(self.mcp_url, self.token, "field_notes_get", {"id": ENTRY_ID}).json()
                self.assertIn('"unavailable"', reply["result"]["content"][0]["text"])
        lines = logs.getvalue().splitlines()
        self.assertEqual(tracebacks_in(lines), 1, "\n".join(lines))
        self.assertEqual(sum("database unavailable" in line for line in lines), 5)
