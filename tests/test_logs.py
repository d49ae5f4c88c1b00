"""CODEX_LOG_FORMAT=json: every line a JSON object with stable keys, a line per tool call,
and no secret or note text in any line, over a whole sign-in and tool-call sequence
against a server process that logs as an operator's would."""

import json
import logging
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx2
from django.contrib.auth import get_user_model
from django.test import SimpleTestCase, TransactionTestCase, override_settings
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from common.access_log import without_query_values
from notebook.models import Codex
from tests.http_client import post, rpc_body
from tests.mcp_client import with_client
from tests.oauth_helpers import Browser, authorization_url, exchange_code, pkce_pair, refresh, register_client
from tests.planted import every_tool, planted_strings
from tests.server_process import ROOT, SERVER_HASHERS, ServerProcess, database_environment, server_environment

TOOLS = {"field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"}


class JsonLogTests(TransactionTestCase):
    def setUp(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="codex-logs-"))
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)

    def test_a_whole_session_logs_json_lines_without_any_secret_or_note_text(self) -> None:
        planted = planted_strings("password", "state")
        with override_settings(PASSWORD_HASHERS=SERVER_HASHERS):
            get_user_model().objects.create_user("alice", password=planted["password"])
        log_path = self.directory / "server.log"
        with open(log_path, "wb") as output:
            # DEBUG: the most an operator can turn on must still leak nothing.
            environ = {**database_environment(), "CODEX_LOG_FORMAT": "json", "CODEX_LOG_LEVEL": "DEBUG"}
            server = ServerProcess(self.directory, environ, output=output)
            server.start()
            try:
                seen = self._session(server.base_url, planted)
            finally:
                server.stop()
        text = log_path.read_text()
        lines = [json.loads(line) for line in text.splitlines() if line.strip()]

        for line in lines:
            self.assertLessEqual({"time", "level", "logger", "message"}, set(line), line)
        for name, value in {**planted, **seen}.items():
            self.assertNotIn(value, text, f"the {name} reached the log")

        # A tool call is one line: its request's access line, with the call's fields.
        access = [line for line in lines if line["logger"] == "codex.access"]
        calls = [line for line in lines if "tool" in line]
        self.assertTrue(calls)
        self.assertTrue(all(line["logger"] == "codex.access" for line in calls), calls)
        self.assertEqual({line["tool"] for line in calls}, TOOLS)
        self.assertEqual(
            sorted(line["outcome"] for line in calls), ["conflict", "not_found", "ok", "ok", "ok", "ok", "ok"]
        )
        codex_id = Codex.objects.get(owner__username="alice").pk
        for line in calls:
            self.assertEqual(line["level"], "INFO")
            self.assertEqual(line["codex_id"], codex_id)
            self.assertIsInstance(line["request_id"], int)
            self.assertEqual((line["method"], line["path"], line["status"]), ("POST", "/mcp", 200))
            self.assertLessEqual(line["tool_duration_ms"], line["duration_ms"])
            self.assertEqual(line["trace_id"], self.trace_id)
        # A line per request, pages and refusals too, naming the parameters but not what they said.
        paths = {(line["method"], line["path"], line["status"]) for line in access}
        self.assertIn(("GET", "/healthz", 200), paths)
        self.assertIn(("POST", "/mcp?access_token=", 401), paths)
        self.assertTrue(any(path.startswith("/o/authorize/?") and "state=&" in path for _, path, _ in paths), paths)
        self.assertFalse([line for line in lines if line["logger"] == "uvicorn.access"])

    def _session(self, base_url: str, planted: dict[str, str]) -> dict[str, str]:
        """Registration, sign-in, consent, code exchange, refresh, the four tools (two
        failures among them) and a page: every secret the session saw, by name."""
        seen: dict[str, str] = {}
        client_id = register_client(base_url).json()["client_id"]
        verifier, challenge = pkce_pair()
        seen["code verifier"] = verifier
        browser = Browser(base_url, "alice", planted["password"])
        try:
            url = authorization_url(
                base_url,
                client_id,
                state=planted["state"],
                code_challenge=challenge,
                code_challenge_method="S256",
                scope="notes:read notes:write",
            )
            seen["code"] = browser.authorize(url)["code"]
            tokens = exchange_code(base_url, client_id, seen["code"], verifier).json()
            seen["first refresh token"] = tokens["refresh_token"]
            seen["first access token"] = tokens["access_token"]
            tokens = refresh(base_url, client_id, tokens["refresh_token"]).json()
            seen["refresh token"] = tokens["refresh_token"]
            seen["access token"] = token = tokens["access_token"]

            # The client's trace: the SDK client sends it as traceparent in each call's _meta.
            parent = SpanContext(
                secrets.randbits(128) | 1, secrets.randbits(64) | 1, False, TraceFlags(TraceFlags.SAMPLED)
            )
            self.trace_id = format(parent.trace_id, "032x")
            with trace.use_span(NonRecordingSpan(parent)):
                with_client(base_url + "/mcp", token, "auto", lambda client: every_tool(client, planted))

            page = browser.http.get(base_url + "/codex/")
            self.assertIn(planted["title"], page.text)
            for name, value in browser.http.cookies.items():
                seen[f"cookie {name}"] = value
        finally:
            browser.close()
        # A token in the query string: refused, and its value must not reach the access log.
        refused = post(base_url + f"/mcp?access_token={token}", rpc_body("tools/list"))
        self.assertEqual(refused.status_code, 401)
        self.assertEqual(httpx2.get(base_url + "/healthz").status_code, 200)
        return seen


class LogFormatTests(SimpleTestCase):
    def test_query_values_are_dropped_but_parameter_names_kept(self) -> None:
        self.assertEqual(
            without_query_values("/o/authorize/?client_id=a&state=b%20c"), "/o/authorize/?client_id=&state="
        )
        self.assertEqual(without_query_values("/mcp?access_token=secret"), "/mcp?access_token=")
        self.assertEqual(without_query_values("/codex/"), "/codex/")

    def test_an_unknown_log_format_refuses_to_start(self) -> None:
        environ = server_environment("http://127.0.0.1:9", Path(tempfile.gettempdir()), {"CODEX_LOG_FORMAT": "xml"})
        done = subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=ROOT, env=environ, capture_output=True, text=True, timeout=60
        )
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("CODEX_LOG_FORMAT must be plain or json", done.stderr)


class UvicornAccessLoggerTests(SimpleTestCase):
    def test_uvicorn_makes_no_access_line_of_its_own(self) -> None:
        # While its access logger has a handler, uvicorn makes its line's arguments for every
        # answer (the line itself is never written: the logger is at WARNING).
        self.assertFalse(logging.getLogger("uvicorn.access").hasHandlers())
