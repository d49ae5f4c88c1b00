"""The access log's middleware: one line per request, a tool call's fields on it, a failed
request still logged, and nothing at all when INFO is off for it (but the statuses a counter
watches); the line written straight to the console handler is the line its formatter (JSON
or plain) makes of the record."""

import asyncio
import io
import json
import logging
import logging.handlers
import os
import subprocess
import sys
from datetime import UTC, datetime
from unittest import mock

from django.conf import settings
from django.test import SimpleTestCase

from codex_site.logfilters import ClientMistakesAreWarnings
from codex_site.logs import CodexJsonFormatter, CodexPlainFormatter, NoDebugFrom
from common import access_log
from common.access_log import access_logged, direct_handler, line_of
from mcp_endpoint.calls import ToolCall


def http_scope(path: str = "/mcp", query: bytes = b"") -> dict:
    return {"type": "http", "method": "POST", "path": path, "query_string": query, "client": ("127.0.0.1", 5000)}


def serve(app, scope: dict) -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


async def receive_nothing() -> dict:
    return {"type": "http.request", "body": b"", "more_body": False}


async def send_nowhere(message: dict) -> None:
    pass


def answering(status: int, calls: int = 0):
    async def app(scope, receive, send) -> None:
        for number in range(calls):
            call = ToolCall("field_notes_get", number + 1, codex_id=3, line=line_of(scope))
            call.user_id, call.client_id, call.entry_id = 42, "client-7", "entry-9"
            call.log("ok", 0.001)
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    return app


class AccessLogTests(SimpleTestCase):
    def test_a_request_is_one_line_with_its_status_duration_and_no_query_values(self) -> None:
        with self.assertLogs("codex.access", "INFO") as logs:
            serve(access_logged(answering(404)), http_scope("/o/authorize/", b"state=secret&client_id=x"))
        (record,) = logs.records
        self.assertEqual((record.method, record.path, record.status), ("POST", "/o/authorize/?state=&client_id=", 404))
        self.assertIsInstance(record.duration_ms, float)
        self.assertEqual(record.client, "127.0.0.1:5000")
        self.assertNotIn("secret", record.getMessage())

    def test_a_tool_call_is_on_its_requests_line_and_a_second_call_has_its_own(self) -> None:
        with self.assertLogs(level="INFO") as logs:
            serve(access_logged(answering(200, calls=2)), http_scope())
        access = [record for record in logs.records if record.name == "codex.access"]
        apart = [record for record in logs.records if record.name == "mcp_endpoint.calls"]
        self.assertEqual(len(access), 1)
        self.assertEqual((access[0].tool, access[0].outcome, access[0].request_id), ("field_notes_get", "ok", 1))
        self.assertEqual((access[0].status, access[0].codex_id, access[0].tool_duration_ms), (200, 3, 1.0))
        self.assertEqual([record.request_id for record in apart], [2])

    def test_without_the_middleware_a_tool_call_writes_its_own_line(self) -> None:
        with self.assertLogs("mcp_endpoint.calls", "INFO") as logs:
            serve(answering(200, calls=1), http_scope())
        self.assertEqual([record.tool for record in logs.records], ["field_notes_get"])

    def test_a_request_that_fails_is_logged_as_500(self) -> None:
        async def failing(scope, receive, send) -> None:
            raise RuntimeError("boom")

        with self.assertLogs("codex.access", "INFO") as logs, self.assertRaises(RuntimeError):
            serve(access_logged(failing), http_scope())
        self.assertEqual([record.status for record in logs.records], [500])

    def test_with_info_off_nothing_is_logged_and_no_line_is_kept(self) -> None:
        seen: list = []

        async def app(scope, receive, send) -> None:
            seen.append(line_of(scope))
            await answering(200)(scope, receive, send)

        written: list[logging.LogRecord] = []
        handler = logging.Handler()
        handler.emit = written.append
        access = logging.getLogger("codex.access")
        level = access.level
        access.setLevel(logging.WARNING)
        access.addHandler(handler)
        self.addCleanup(access.setLevel, level)
        self.addCleanup(access.removeHandler, handler)
        serve(access_logged(app), http_scope())
        self.assertEqual((seen, written), ([None], []))
        # A counter that watches the request gets its status all the same, and still no line.
        counter = Counting(watching="/mcp")
        serve(access_logged(app, counter), http_scope())
        serve(access_logged(app, counter), http_scope("/other"))
        self.assertEqual((counter.statuses, seen, written), ([200], [None, None, None], []))

    def test_the_counter_gets_each_watched_answers_status_once(self) -> None:
        counter = Counting(watching="/mcp")
        with self.assertLogs("codex.access", "INFO") as logs:
            serve(access_logged(answering(401), counter), http_scope())
            serve(access_logged(answering(200, calls=1), counter), http_scope())
            serve(access_logged(answering(200), counter), http_scope("/o/token/"))
        self.assertEqual(counter.statuses, [401, 200])
        self.assertEqual([record.status for record in logs.records], [401, 200, 200])


class Counting:
    """A ``StatusCounter`` that watches one path and keeps what it was given."""

    def __init__(self, watching: str) -> None:
        self.watching = watching
        self.statuses: list[int] = []

    def watches(self, scope: dict) -> bool:
        return scope["path"] == self.watching

    def count(self, status: int) -> None:
        self.statuses.append(status)


class DirectWriteTests(SimpleTestCase):
    """With the JSON console handler as the line's only handler, the line is written to its
    stream without a record: the same line, and any other configuration gets the record."""

    def setUp(self) -> None:
        self.logger = logging.getLogger("codex.access")
        self.saved = (self.logger.handlers[:], self.logger.propagate, self.logger.level, self.logger.filters[:])
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(CodexJsonFormatter())
        self.handler.addFilter(NoDebugFrom(["oauthlib"]))
        self.handler.addFilter(ClientMistakesAreWarnings())
        self.logger.handlers, self.logger.propagate = [self.handler], False
        self.logger.setLevel(logging.INFO)

    def tearDown(self) -> None:
        handlers, propagate, level, filters = self.saved
        self.logger.handlers, self.logger.propagate, self.logger.filters = handlers, propagate, filters
        self.logger.setLevel(level)

    def lines(self) -> list[dict]:
        access_log.flush()
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def test_lines_of_one_event_loop_are_written_together_and_none_is_lost(self) -> None:
        def written() -> int:
            return len(self.stream.getvalue().splitlines())

        async def requests(count: int, *, wait: bool) -> None:
            before = written()
            app = access_logged(answering(200, calls=1))
            for _ in range(count):
                await app(http_scope(), receive_nothing, send_nowhere)
            if wait:
                # Made, not written yet: they wait for more lines or for the timer.
                self.assertEqual(written(), before)
                # The timer was set before this sleep, with an earlier deadline: it has fired.
                await asyncio.sleep(access_log.FLUSH_SECONDS * 1.5)
                self.assertEqual(written(), before + count)

        asyncio.run(requests(3, wait=True))
        # A full batch is written at once.
        asyncio.run(requests(access_log.BATCH_LINES, wait=False))
        self.assertEqual(written(), 3 + access_log.BATCH_LINES)
        # Outside an event loop a line is written at once.
        access_log._write(http_scope(), 204, 0.001, None)
        self.assertEqual(json.loads(self.stream.getvalue().splitlines()[-1])["status"], 204)
        self.assertEqual(len(self.lines()), 3 + access_log.BATCH_LINES + 1)

    def test_lines_still_waiting_are_written_when_the_process_exits(self) -> None:
        # The event loop ends right after the request, before the timer: only the exit writes it.
        script = (
            "import asyncio, logging, sys\n"
            "from codex_site.logs import CodexJsonFormatter\n"
            "from common.access_log import access_logged\n"
            "handler = logging.StreamHandler(sys.stdout)\n"
            "handler.setFormatter(CodexJsonFormatter())\n"
            "logging.basicConfig(level=logging.INFO, handlers=[handler])\n"
            "async def answer(scope, receive, send):\n"
            "    await send({'type': 'http.response.start', 'status': 201, 'headers': []})\n"
            "    await send({'type': 'http.response.body', 'body': b''})\n"
            "async def nothing():\n"
            "    return {'type': 'http.request'}\n"
            "async def nowhere(message):\n"
            "    pass\n"
            "scope = {'type': 'http', 'method': 'GET', 'path': '/x', 'query_string': b'', 'client': None}\n"
            "asyncio.run(access_logged(answer)(scope, nothing, nowhere))\n"
        )
        done = subprocess.run([sys.executable, "-c", script], cwd=settings.BASE_DIR, capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        (line,) = [json.loads(text) for text in done.stdout.splitlines()]
        self.assertEqual((line["logger"], line["path"], line["status"]), ("codex.access", "/x", 201))

    def test_the_direct_line_is_the_line_the_formatter_makes_of_the_record(self) -> None:
        for formatter in (CodexJsonFormatter(), CodexPlainFormatter()):
            with self.subTest(type(formatter).__name__):
                self.handler.setFormatter(formatter)
                self.logger.filters = []
                self.stream.seek(0)
                self.stream.truncate()
                self.assertIs(direct_handler(), self.handler)
                # One clock for both lines: the same time, and the same durations.
                with (
                    mock.patch("time.time", return_value=1_772_368_215.25),
                    mock.patch("time.perf_counter", return_value=5.0),
                ):
                    serve(access_logged(answering(200, calls=1)), http_scope("/mcp", b"a=1"))
                    access_log.flush()
                    # A filter on the logger itself sends the same request through a record.
                    self.logger.addFilter(logging.Filter())
                    self.assertIsNone(direct_handler())
                    serve(access_logged(answering(200, calls=1)), http_scope("/mcp", b"a=1"))
                direct, recorded = self.stream.getvalue().splitlines()
                self.assertEqual(direct, recorded)
                self.assertIn(
                    "/mcp?a= 200 in 0.0 ms: tool call field_notes_get ok (codex 3, person 42, client client-7, "
                    "entry entry-9, request 1",
                    direct,
                )

    def test_a_request_id_beyond_64_bits_is_written_as_its_digits(self) -> None:
        # A JSON-RPC id is the client's to choose; orjson writes no integer beyond 64 bits.
        huge = 2**70

        async def app(scope, receive, send) -> None:
            ToolCall("field_notes_get", huge, codex_id=3, line=line_of(scope)).log("ok", 0.001)
            await answering(200)(scope, receive, send)

        serve(access_logged(app), http_scope())
        self.logger.addFilter(logging.Filter())  # the same line through a record
        serve(access_logged(app), http_scope())
        self.assertEqual([line["request_id"] for line in self.lines()], [str(huge)] * 2)

    def test_a_line_the_formatter_cannot_write_costs_only_that_line(self) -> None:
        reported: list[logging.LogRecord] = []
        self.handler.handleError = reported.append

        def calling(codex_id: int):
            async def app(scope, receive, send) -> None:
                ToolCall("field_notes_get", 1, codex_id=codex_id, line=line_of(scope)).log("ok", 0.001)
                await answering(200)(scope, receive, send)

            return access_logged(app)

        unwritable: list = []
        unwritable.append(unwritable)  # neither orjson nor the json module writes a cycle

        async def requests() -> None:  # one event loop: the three lines wait in one batch
            for codex_id in (1, unwritable, 3):
                await calling(codex_id)(http_scope(), receive_nothing, send_nowhere)

        asyncio.run(requests())
        self.assertEqual([line["codex_id"] for line in self.lines()], [1, 3])
        self.assertEqual([record.codex_id for record in reported], [unwritable])

    def test_a_line_written_later_has_the_time_it_was_made(self) -> None:
        made = datetime(2026, 3, 1, 12, 30, 15, 250000, tzinfo=UTC)

        async def request() -> None:
            with mock.patch("time.time", return_value=made.timestamp()):
                await access_logged(answering(200, calls=1))(http_scope(), receive_nothing, send_nowhere)

        asyncio.run(request())  # the line waits for its batch, and is written after the patch
        (line,) = self.lines()
        self.assertEqual(datetime.fromisoformat(line["time"]), made)

    def test_any_other_configuration_gets_the_record(self) -> None:
        def handler_with(**changes) -> logging.Handler:
            handler = changes.pop("handler", None) or logging.StreamHandler(self.stream)
            handler.setFormatter(changes.pop("formatter", CodexJsonFormatter()))
            for each in changes.pop("filters", []):
                handler.addFilter(each)
            handler.setLevel(changes.pop("level", logging.NOTSET))
            return handler

        rotating = logging.handlers.RotatingFileHandler(os.devnull, delay=True)
        self.addCleanup(rotating.close)
        others = {
            "a handler that is not a plain stream": [handler_with(handler=rotating)],
            "a formatter that renders records only": [handler_with(formatter=logging.Formatter())],
            "a filter that may change the line": [handler_with(filters=[logging.Filter("codex")])],
            "a handler above INFO": [handler_with(level=logging.WARNING)],
            "two handlers": [handler_with(), handler_with()],
        }
        for name, handlers in others.items():
            with self.subTest(name):
                self.logger.handlers = handlers
                self.assertIsNone(direct_handler())
        # A test's assertLogs puts its own handler in: it sees the line as a record.
        self.logger.handlers = [self.handler]
        with self.assertLogs("codex.access", "INFO") as logs:
            serve(access_logged(answering(200)), http_scope())
        self.assertEqual([record.status for record in logs.records], [200])
        self.assertEqual(self.stream.getvalue(), "")
