"""Nothing a request sends writes a line of its own into the log (contract 10): every field a
stranger influences is escaped, in the plain format and in JSON, on the access log's direct path
and on the record path, so that one record is always one physical line (its traceback's
continuation lines, if any, indented so that none reads as a record).

The forged text below holds every character ``str.splitlines`` breaks a line at, ANSI
sequences, DEL, a C1 control and a bidirectional override, behind a line that looks like an audit
line; it is sent wherever a stranger can put text that reaches a line: a path and a query to
``/mcp`` and to Django, a tool call's JSON-RPC id, a metadata-document client id (refused by the
policy, and on a tool call's line and a revocation's), an OAuth client's name, a username that
fails to sign in, a SCIM userName, the User-Agent, an exception's message, an address from a
proxy's header."""

import asyncio
import contextlib
import io
import json
import logging
import re
import socket
from collections.abc import Iterator
from urllib.parse import quote, urlencode

import httpx2
from django.core.cache import cache
from django.test import Client, SimpleTestCase, override_settings
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.models import Organization
from codex_site.logfilters import ClientMistakesAreWarnings
from codex_site.logs import CodexJsonFormatter, CodexPlainFormatter, NoDebugFrom, one_line
from codex_site.settings import oauth2_provider_settings
from common import access_log
from common.access_log import access_logged, direct_handler, line_of
from common.audit import audit
from mcp_endpoint.calls import ToolCall
from tests.base import connect_application
from tests.hostile import emitted_logs
from tests.http_client import post, rpc_body
from tests.live import LiveServerTestCase
from tests.oauth_helpers import forms_of, pkce_pair

FORGED_RECORD = "1999-12-31 23:59:59,999 INFO codex.access.audit audit token.granted: user_id=1"
FORGED = (
    f"forged\r\n{FORGED_RECORD}\x1b[2J\x1b[31m|\r|\n|\x85|\u2028|\u2029|\x0b|\x0c|\x1c|\x1d|\x1e|\x7f|\x9b|"
    "\u202e|\t|end"
)
# As JSON writes each of them (and DEL, the C1 controls and the bidirectional controls too).
ESCAPED = (
    rf"forged\r\n{FORGED_RECORD}\u001b[2J\u001b[31m|\r|\n|\u0085|\u2028|\u2029|\u000b|\f|\u001c|\u001d|\u001e|"
    r"\u007f|\u009b|\u202e|\t|end"
)
# Every character str.splitlines ends a line at.
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# What a line must not hold raw: those, the C0 and C1 controls, DEL, the bidirectional controls.
UNSAFE = {chr(code) for code in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, *range(0x202A, 0x202F)]} | {
    chr(code) for code in range(0x2066, 0x206A)
}
# Any text, the characters that matter drawn often.
TEXTS = st.text(st.one_of(st.sampled_from(sorted(UNSAFE | {"\\", '"', " "})), st.characters()))
CIMD_CLIENT_ID = f"https://cimd.example/{FORGED}"
# What begins a plain record's line: its time, its level, its logger.
PLAIN_RECORD = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+ ")
FORMATTERS = {"plain": CodexPlainFormatter, "json": CodexJsonFormatter}


def parsed(text: str, format_name: str) -> list[dict | str]:
    """Each physical line of ``text`` (split wherever str.splitlines splits), checked to be a
    record of its own: a JSON object, or a plain line that begins with a real record's time, level
    and logger (not the forged record's)."""
    lines: list[dict | str] = []
    for physical in text.splitlines():
        if format_name == "json":
            line = json.loads(physical)
            assert {"time", "level", "logger", "message"} <= set(line), physical
            lines.append(line)
        else:
            assert PLAIN_RECORD.match(physical) and not physical.startswith("1999-"), physical
            lines.append(physical)
    return lines


def record(message: str, *args, exc_info=None, **extra) -> logging.LogRecord:
    made = logging.LogRecord("codex.test", logging.WARNING, __file__, 1, message, args, exc_info)
    made.__dict__.update(extra)
    return made


class OneRecordOneLineTests(SimpleTestCase):
    """The formatters themselves, on both of their paths (a record, and ``render_fields``)."""

    def test_each_line_break_and_control_is_written_as_json_writes_it(self) -> None:
        plain = CodexPlainFormatter().format(record("path %s", FORGED))
        self.assertEqual(plain.splitlines(), [plain])
        self.assertTrue(plain.endswith(f" WARNING codex.test path {ESCAPED}"), plain)
        direct = CodexPlainFormatter().render_fields("INFO", "codex.access", f"GET /{FORGED}", {}, created=1.0)
        self.assertEqual(direct.splitlines(), [direct])
        self.assertTrue(direct.endswith(f" INFO codex.access GET /{ESCAPED}"), direct)

    def test_a_json_line_escapes_the_line_separators_and_parses_back_to_the_same_value(self) -> None:
        for line in (
            CodexJsonFormatter().format(record("path %s", FORGED, client_id=CIMD_CLIENT_ID)),
            CodexJsonFormatter().render_fields(
                "INFO", "codex.access", FORGED, {"client_id": CIMD_CLIENT_ID}, created=1
            ),
        ):
            with self.subTest(line=line[:40]):
                self.assertEqual(line.splitlines(), [line])
                self.assertIn(r"\u2028|\u2029", line)
                self.assertTrue(line.isascii(), line)
                value = json.loads(line)
                self.assertIn(FORGED, value["message"])
                self.assertEqual(value["client_id"], CIMD_CLIENT_ID)

    @settings(max_examples=300, deadline=None)
    @given(text=TEXTS)
    def test_the_escape_leaves_nothing_unsafe_reads_back_as_json_and_changes_safe_text_not_at_all(
        self, text: str
    ) -> None:
        escaped = one_line(text)
        self.assertFalse(set(escaped) & UNSAFE)
        self.assertEqual(one_line(escaped), escaped)
        if not set(text) & UNSAFE:
            self.assertEqual(escaped, text)
        # With no backslash of its own, the escaped text is the inside of a JSON string.
        assume("\\" not in text)
        self.assertEqual(json.loads('"' + escaped.replace('"', '\\"') + '"'), text)

    @settings(max_examples=300, deadline=None)
    @given(message=TEXTS, value=TEXTS)
    # A lone surrogate: JSON lets a client send one ("\ud800" in a JSON-RPC id), and orjson
    # refuses to write it (the JSON line was lost, with a traceback on stderr).
    @example(message="id \ud800", value="\udfff path")
    def test_any_text_in_a_message_or_a_field_is_one_line_that_reads_back(self, message: str, value: str) -> None:
        plain, json_formatter = CodexPlainFormatter(), CodexJsonFormatter()
        lines = {
            "plain record": plain.format(record("%s", message, user_agent=value)),
            "plain direct": plain.render_fields("INFO", "codex.access", message, {"path": value}, created=1.0),
            "json record": json_formatter.format(record("%s", message, user_agent=value)),
            "json direct": json_formatter.render_fields("INFO", "codex.access", message, {"path": value}, created=1.0),
        }
        for name, line in lines.items():
            self.assertEqual(len(line.splitlines()), 1, name)
            self.assertFalse(set(line) & set(LINE_BREAKS), name)
        self.assertEqual(json.loads(lines["json record"])["message"], message)
        self.assertEqual(json.loads(lines["json record"])["user_agent"], value)
        self.assertEqual(json.loads(lines["json direct"])["path"], value)

    def test_a_traceback_carrying_a_strangers_text_continues_on_indented_lines_only(self) -> None:
        try:
            raise ValueError(f"bad client {FORGED}")
        except ValueError as error:
            failed = record("refused %s", FORGED, exc_info=(type(error), error, error.__traceback__))
        plain = CodexPlainFormatter().format(failed)
        first, *rest = plain.split("\n")
        # Lines end only at the traceback's LFs (the message's own among them), each following
        # line indented: none begins as a record does, with a time.
        self.assertEqual(plain.splitlines(), plain.split("\n"))
        self.assertTrue(PLAIN_RECORD.match(first) and first.endswith(f"refused {ESCAPED}"), first)
        self.assertEqual(rest[0], "  Traceback (most recent call last):")
        for line in rest:
            self.assertTrue(line.startswith("  "), line)
        message = f"  ValueError: bad client {ESCAPED}".replace(r"\n", "\n  ")
        self.assertTrue(plain.endswith(message), plain)
        line = CodexJsonFormatter().format(failed)
        self.assertEqual(line.splitlines(), [line])
        self.assertIn(f"ValueError: bad client {FORGED}", json.loads(line)["exc_info"])

    def test_an_audit_line_naming_a_strangers_client_id_is_one_line(self) -> None:
        for format_name, formatter in FORMATTERS.items():
            with self.subTest(format_name), captured_audit(formatter()) as stream:
                audit("token.granted", user_id=1, client_id=CIMD_CLIENT_ID, grant_type="authorization_code")
                audit("token.revoked", user_id=1, client_id=CIMD_CLIENT_ID, by="client")
                audit("policy.refused", policy="cimd_hosts", client_id=CIMD_CLIENT_ID, reason=f"host {FORGED}")
            lines = parsed(stream.getvalue(), format_name)
            self.assertEqual(len(lines), 3)
            for line in lines:
                if format_name == "json":
                    self.assertEqual(line["client_id"], CIMD_CLIENT_ID)
                else:
                    self.assertIn(f"client_id=https://cimd.example/{ESCAPED}", line)


@contextlib.contextmanager
def captured_audit(formatter: logging.Formatter) -> Iterator[io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger("codex.access.audit")
    saved = logger.handlers[:], logger.propagate, logger.level
    logger.handlers, logger.propagate = [handler], False
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.handlers, logger.propagate = saved[0], saved[1]
        logger.setLevel(saved[2])


class AccessLineTests(SimpleTestCase):
    """The access line as the middleware writes it, to a real stream handler: straight to its
    stream (the default set-up), and through a record (any other), in both formats. The scope is
    what a server hands the application: a path it decoded, a query's raw bytes (a server less
    strict than h11 passes bytes that decode to C1 controls), an address a trusted proxy's
    header chose."""

    QUERY = b"na\r\nme\x1b[2J\x85=secret&other=1"

    def setUp(self) -> None:
        self.logger = logging.getLogger("codex.access")
        saved = (self.logger.handlers[:], self.logger.propagate, self.logger.level, self.logger.filters[:])
        self.addCleanup(self.restore, *saved)
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.addFilter(NoDebugFrom(["oauthlib"]))
        self.handler.addFilter(ClientMistakesAreWarnings())
        self.logger.handlers, self.logger.propagate, self.logger.filters = [self.handler], False, []
        self.logger.setLevel(logging.INFO)

    def restore(self, handlers, propagate, level, filters) -> None:
        access_log.flush()
        self.logger.handlers, self.logger.propagate, self.logger.filters = handlers, propagate, filters
        self.logger.setLevel(level)

    def serve(self) -> None:
        async def app(scope, receive, send) -> None:
            call = ToolCall("field_notes_get", FORGED, codex_id=3, line=line_of(scope))
            call.user_id, call.client_id, call.entry_id = 42, CIMD_CLIENT_ID, None
            call.log("not_found", 0.001)
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"{}"})

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            pass

        scope = {
            "type": "http",
            "method": "POST",
            "path": f"/{FORGED}",
            "query_string": self.QUERY,
            "client": (f"203.0.113.9{FORGED}", 5000),
        }
        asyncio.run(access_logged(app)(scope, receive, send))
        access_log.flush()

    def test_a_strangers_path_query_address_id_and_client_id_stay_on_one_line(self) -> None:
        query = "?na\r\nme\x1b[2J\x85=&other="  # the names as they came, the values dropped
        for format_name, formatter in FORMATTERS.items():
            for direct in (True, False):
                with self.subTest(format_name, direct=direct):
                    self.handler.setFormatter(formatter())
                    self.logger.filters = [] if direct else [logging.Filter()]
                    self.assertEqual(direct_handler() is self.handler, direct)
                    self.stream.seek(0)
                    self.stream.truncate()
                    self.serve()
                    (line,) = parsed(self.stream.getvalue(), format_name)
                    if format_name == "json":
                        self.assertEqual(line["path"], f"/{FORGED}{query}")
                        self.assertEqual((line["request_id"], line["client_id"]), (FORGED, CIMD_CLIENT_ID))
                        self.assertEqual(line["client"], f"203.0.113.9{FORGED}:5000")
                    else:
                        self.assertIn(rf"POST /{ESCAPED}?na\r\nme\u001b[2J\u0085=&other= 200", line)
                        self.assertIn(f"client https://cimd.example/{ESCAPED}, entry None, request {ESCAPED},", line)


class StrangersTextOverHttpTests(LiveServerTestCase):
    """The real application behind a real uvicorn, logging through the project's console handler
    (its filters, and each format's formatter), the access lines written straight to its stream
    (the default) and through records: every surface where a stranger's text reaches a line."""

    def setUp(self) -> None:
        self.person = self.make_user("alice")
        self.organization = Organization.objects.create(name="acme", domains=["acme.example"])
        self.scim_credential = credentials.issue(organization=self.organization)
        self.application, _ = connect_application(self.person, "agent")
        self.application.client_id, self.application.name = CIMD_CLIENT_ID, FORGED
        self.application.save()

    def test_every_surface_writes_one_line_per_record_in_both_formats_on_both_paths(self) -> None:
        for format_name in FORMATTERS:
            for direct in (True, False):
                with self.subTest(format_name, direct=direct):
                    cache.clear()  # the sign-in throttle's counts of the run before
                    with logged_as(format_name, direct=direct) as logs:
                        self.send_everything()
                    self.check(format_name, direct, logs)

    def send_everything(self) -> None:
        base = self.live.base_url
        # HTTP allows no control in a header, but bytes past ASCII (a C1 control, read as Latin-1).
        agent = {"User-Agent": b"agent \x85\x9b[31m forged"}
        with httpx2.Client(base_url=base, headers=agent, timeout=30) as http:
            # A 404 from Django, a path with U+0000 (refused before any view), a query's names.
            self.assertEqual(http.get(f"/{quote(FORGED)}").status_code, 404)
            self.assertEqual(http.get(f"/{quote(FORGED)}%00").status_code, 400)
            self.assertEqual(http.post(f"/mcp?{quote(FORGED)}=secret").status_code, 401)
            # A metadata-document client the operator's policy refuses (an audit line).
            _, challenge = pkce_pair()
            query = {"client_id": CIMD_CLIENT_ID, "response_type": "code", "code_challenge": challenge}
            hosts = oauth2_provider_settings(base) | {"CIMD_ALLOWED_HOSTS": ["agents.example.com"]}
            with override_settings(OAUTH2_PROVIDER=hosts):
                self.assertEqual(http.get(f"/o/authorize/?{urlencode(query)}").status_code, 400)
            # A client registered with the forged text as its name (refused: not a text it keeps).
            http.post("/o/register/", json={"client_name": FORGED, "redirect_uris": ["http://127.0.0.1:9/cb"]})
            # A username that fails to sign in until the throttle refuses it (a WARNING naming it).
            for attempt in range(6):
                page = http.get("/accounts/login/")
                fields = forms_of(page.text)[-1]["fields"]
                http.post("/accounts/login/", data={**fields, "login": FORGED, "password": f"guess-{attempt}"})
            # A SCIM userName.
            scim = {"Authorization": f"Bearer {self.scim_credential}", "Content-Type": "application/scim+json"}
            body = {"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": FORGED}
            http.post("/scim/v2/Users", json=body, headers=scim)
        # A tool call whose JSON-RPC id is the forged text, by the metadata-document client (a
        # token of each run's own: the run ends by revoking the client's).
        _, token = connect_application(self.person, "agent", application=self.application)
        called = post(
            self.mcp_url,
            {**rpc_body("tools/call", {"name": "field_notes_search", "arguments": {"query": "x"}}), "id": FORGED},
            token=token,
        )
        self.assertEqual(called.json()["id"], FORGED)
        # uvicorn's own line for a request h11 refuses (ESC in its target).
        with socket.create_connection(("127.0.0.1", self.live.port), timeout=30) as raw:
            raw.sendall(b"GET /\x1b[2J HTTP/1.1\r\nHost: x\r\n\r\n")
            raw.recv(1024)
        # The person revokes the metadata-document client on Connected applications.
        page = Client()
        page.force_login(self.person)
        page.post(f"/account/clients/{self.application.pk}/revoke/")

    def check(self, format_name: str, direct: bool, logs) -> None:
        lines = parsed(logs.getvalue(), format_name)
        access = [line for line in lines if logger_of(line, format_name) == "codex.access"]
        # One physical line per record: the emitted records, and (straight to the stream, without
        # a record) the access lines.
        self.assertEqual(len(lines), len(logs.records) + (len(access) if direct else 0), logs.getvalue())

        def only(logger: str, *texts: str) -> dict | str:
            found = [
                line
                for line in lines
                if logger_of(line, format_name) == logger and all(text in str(line) for text in texts)
            ]
            self.assertEqual(len(found), 1, (logger, texts, lines))
            return found[0]

        if format_name == "json":
            self.assertEqual(only("codex.access", "GET /forged", " 404 in ")["path"], f"/{FORGED}")
            self.assertEqual(only("codex.access", "GET /forged", " 400 in ")["path"], f"/{FORGED}\x00")
            self.assertIn(FORGED, only("codex_site.middleware", "U+0000")["message"])
            self.assertEqual(only("codex.access", "POST /mcp?forged")["path"], f"/mcp?{quote(FORGED)}=")
            refused = only("codex.access.audit", "policy.refused")
            self.assertEqual(refused["client_id"], CIMD_CLIENT_ID)
            self.assertIn(repr(FORGED), only("authserver.people.signin", "sign-in refused")["message"])
            call = only("codex.access", "tool call")
            self.assertEqual((call["request_id"], call["client_id"]), (FORGED, CIMD_CLIENT_ID))
            self.assertEqual(only("codex.access.audit", "token.revoked")["client_id"], CIMD_CLIENT_ID)
        else:
            self.assertIn(f"GET /{ESCAPED} 404 in ", only("codex.access", "GET /forged", " 404 in "))
            self.assertIn(rf"GET /{ESCAPED}\u0000 400 in ", only("codex.access", "GET /forged", " 400 in "))
            self.assertIn(rf"on /{ESCAPED}\u0000", only("codex_site.middleware", "U+0000"))
            self.assertIn(f"POST /mcp?{quote(FORGED)}= 401", only("codex.access", "POST /mcp?forged"))
            self.assertIn(f"client_id=https://cimd.example/{ESCAPED} ", only("codex.access.audit", "policy.refused"))
            self.assertIn(f"client https://cimd.example/{ESCAPED}, ", only("codex.access", "tool call"))
            self.assertIn(f"request {ESCAPED}, ", only("codex.access", "tool call"))
            self.assertIn(f"client_id=https://cimd.example/{ESCAPED} ", only("codex.access.audit", "token.revoked"))
            only("authserver.people.signin", "sign-in refused")
        only("django.request", "Not Found")
        only("uvicorn.error", "Invalid HTTP request")


def logger_of(line: dict | str, format_name: str) -> str:
    return line["logger"] if format_name == "json" else line.split(" ", 4)[3]  # type: ignore[index]


@contextlib.contextmanager
def logged_as(format_name: str, *, direct: bool) -> Iterator:
    """What the configured console handler writes while the block runs, with this format's
    formatter; the access lines straight to its stream (``direct``) or through records."""
    access_log.flush()
    console = logging.getLogger().handlers
    saved = [handler.formatter for handler in console]
    for handler in console:
        handler.setFormatter(FORMATTERS[format_name]())
    # A live server's uvicorn configured its own loggers after the project's; in production the
    # project's configuration comes second and gives them the console handler (settings.LOGGING).
    uvicorn = [logging.getLogger(name) for name in ("uvicorn", "uvicorn.error")]
    saved_uvicorn = [(logger.handlers, logger.propagate) for logger in uvicorn]
    for logger in uvicorn:
        logger.handlers, logger.propagate = list(console), False
    access = logging.getLogger("codex.access")
    through_records = logging.Filter()
    if not direct:
        access.addFilter(through_records)
    try:
        with emitted_logs() as logs:
            assert (direct_handler() is not None) == direct
            yield logs
            access_log.flush()
    finally:
        access.removeFilter(through_records)
        for logger, (handlers, propagate) in zip(uvicorn, saved_uvicorn, strict=True):
            logger.handlers, logger.propagate = handlers, propagate
        for handler, formatter in zip(console, saved, strict=True):
            handler.setFormatter(formatter)
