"""One test per class of hostile input that once gave a 500, a hang or an ERROR line
(issue 25): Unicode digits in integer parameters, import values Python cannot hold,
imports that contradict their own history, the consent POST, registration texts, form
bodies in another charset, bodies that never come, and client mistakes logged as faults."""

import base64
import copy
import json
import logging

import httpx2
from django.contrib.auth import get_user_model
from django.core.exceptions import TooManyFieldsSent
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.http.multipartparser import MultiPartParserError
from django.test import Client, SimpleTestCase
from django.urls import reverse
from oauth2_provider.models import get_application_model

from codex_site.logfilters import ClientMistakesAreWarnings
from notebook import services, transfer
from notebook.models import Entry
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase, connect_application
from tests.hostile import assert_consistent, emitted_logs, raw_request
from tests.live import LiveServerTestCase
from tests.test_transfer import export_of

IMPORT = reverse("mycodex:import")


def upload(document: object) -> dict:
    raw = document if isinstance(document, bytes) else json.dumps(document).encode()
    return {"file": SimpleUploadedFile("codex.json", raw)}


class UnicodeDigitsTest(NotebookTestCase):
    def setUp(self) -> None:
        self.client.force_login(self.alice)
        self.entry = self.save(content="one")

    def test_integer_parameters_take_ascii_digits_only(self) -> None:
        for url in [
            reverse("authserver:clients") + "?revoked=%C2%B2",
            reverse("authserver:clients") + "?revoked=%D9%A3",  # ARABIC-INDIC DIGIT THREE
            reverse("mycodex:entry", args=[self.entry.id]) + "?from=%C2%B2&to=1",
            reverse("mycodex:entry", args=[self.entry.id]) + "?from=1&to=%EF%BC%91",  # FULLWIDTH ONE
            reverse("mycodex:list") + "?app=%C2%B2",
            reverse("mycodex:list") + "?app=%F0%9D%9F%99",  # MATHEMATICAL DOUBLE-STRUCK ONE
        ]:
            with self.subTest(url=url), emitted_logs() as logs:
                response = self.client.get(url)
                self.assertLess(response.status_code, 500)
                self.assertNotIn("ERROR", logs.getvalue())


class ImportValuesPythonCannotHoldTest(NotebookTestCase):
    def setUp(self) -> None:
        self.client.force_login(self.alice)
        entry = self.save(content="one")
        self.document = export_of(self.alice_codex)
        services.codex_clear(codex=self.alice_codex)
        self.entry_id = str(entry.id)

    def post(self, document: object):
        with emitted_logs() as logs:
            response = self.client.post(IMPORT, upload(document))
        self.assertNotIn("ERROR", logs.getvalue())
        self.assertFalse(Entry.objects.filter(codex=self.alice_codex).exists())
        return response

    def test_a_deeply_nested_file_is_refused(self) -> None:
        for raw in [b"[" * 100_000 + b"]" * 100_000, b'{"a":' * 5_000 + b"1" + b"}" * 5_000]:
            with self.subTest(size=len(raw)):
                self.assertContains(self.post(raw), "nested too deeply", status_code=400)

    def test_times_at_the_edges_of_the_calendar_are_refused(self) -> None:
        for moment in [
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "0001-01-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "9999-12-31T23:59:59Z",
        ]:
            for member in ("createdAt", "updatedAt"):
                with self.subTest(moment=moment, member=member):
                    document = copy.deepcopy(self.document)
                    document["entries"][0][member] = moment
                    self.assertEqual(self.post(document).status_code, 400)
            with self.subTest(moment=moment, member="recordedAt"):
                document = copy.deepcopy(self.document)
                document["entries"][0]["revisions"][0]["recordedAt"] = moment
                self.assertEqual(self.post(document).status_code, 400)

    def test_a_lone_surrogate_id_is_refused_without_breaking_the_page(self) -> None:
        document = copy.deepcopy(self.document)
        document["entries"][0]["id"] = "\ud800"
        raw = json.dumps(document).encode()  # ensure_ascii: the file carries "\ud800" as an escape
        self.assertContains(self.post(raw), "it is not JSON", status_code=400)
        # A document built in Python (not parsed from a file) reports the id escaped.
        report = transfer.codex_import(codex=self.alice_codex, document=document)
        self.assertEqual(report.refused[0].entry_id, "\\ud800")
        self.assertIn("UUIDv4", report.refused[0].reason)

    def test_a_lone_surrogate_in_the_envelope_is_refused(self) -> None:
        for change in ({"version": "\udfff"}, {"format": "\ud800"}, {"entries": "\ud800"}):
            with self.subTest(change=change):
                self.assertEqual(self.post({**self.document, **change}).status_code, 400)


class ImportContradictingHistoryTest(NotebookTestCase):
    def setUp(self) -> None:
        entry = self.save(title="A", content="one", tags=["t"])
        services.entry_update(
            codex=self.alice_codex,
            entry_id=entry.id,
            expected_revision=1,
            data=parse_entry_input({"title": "A", "content": "two", "tags": ["t"]}),
        )
        self.good = export_of(self.alice_codex)["entries"][0]
        services.codex_clear(codex=self.alice_codex)

    def refused(self, entry: dict) -> str:
        document = {"format": "agent-codex-export", "version": 2, "entries": [entry]}
        report = transfer.codex_import(codex=self.bob_codex, document=document)
        self.assertFalse(report.applied, entry)
        self.assertFalse(Entry.objects.filter(codex=self.bob_codex).exists())
        return report.refused[0].reason

    def test_the_good_entry_imports(self) -> None:
        document = {"format": "agent-codex-export", "version": 2, "entries": [self.good]}
        self.assertTrue(transfer.codex_import(codex=self.bob_codex, document=document).applied)
        assert_consistent(self)

    def test_entries_that_contradict_their_newest_snapshot_are_refused(self) -> None:
        for member, value in [("title", "B"), ("content", "three"), ("tags", ["u"]), ("relatedAgentIds", ["x"])]:
            with self.subTest(member=member):
                entry = {**copy.deepcopy(self.good), member: value}
                self.assertIn("newest revision", self.refused(entry))
        entry = copy.deepcopy(self.good)
        entry["provenance"] = {"source": "planted"}
        self.assertIn("newest revision", self.refused(entry))
        entry = copy.deepcopy(self.good)
        del entry["title"]
        self.assertIn("newest revision", self.refused(entry))

    def test_revisions_must_run_from_1_to_the_entry_revision_in_time_order(self) -> None:
        entry = copy.deepcopy(self.good)
        entry["revisions"] = entry["revisions"][1:]  # revision 1 missing
        self.assertIn("revisions", self.refused(entry))
        entry = copy.deepcopy(self.good)
        entry["revisions"].reverse()  # 2 before 1
        self.assertIn("revisions", self.refused(entry))
        entry = copy.deepcopy(self.good)
        first, second = entry["revisions"]
        first["recordedAt"], second["recordedAt"] = second["recordedAt"], "2020-01-01T00:00:00.000Z"
        self.assertIn("recordedAt", self.refused(entry))

    def test_times_must_agree_with_the_snapshots(self) -> None:
        entry = copy.deepcopy(self.good)
        entry["createdAt"] = "2020-01-01T00:00:00.000Z"  # revision 1 was recorded later
        self.assertIn("createdAt", self.refused(entry))
        entry = copy.deepcopy(self.good)
        entry["updatedAt"] = "2099-01-01T00:00:00.000Z"  # in the future, and not the newest snapshot's time
        self.assertIn("updatedAt", self.refused(entry))

    def test_an_id_that_is_not_a_version_4_uuid_is_refused(self) -> None:
        entry = {**copy.deepcopy(self.good), "id": "11111111-1111-1111-8111-111111111111"}
        self.assertIn("UUIDv4", self.refused(entry))


class ConsentPostTest(NotebookTestCase):
    def setUp(self) -> None:
        self.client = Client(enforce_csrf_checks=True)
        self.client.force_login(self.alice)
        self.client.get("/accounts/login/")  # a CSRF cookie
        self.csrf = self.client.cookies["csrftoken"].value
        self.application, _ = connect_application(self.alice, "desk")

    def post(self, data: dict):
        with emitted_logs() as logs:
            response = self.client.post("/o/authorize/", {"csrfmiddlewaretoken": self.csrf, **data})
        self.assertNotIn("ERROR", logs.getvalue())
        return response

    def test_a_consent_post_with_nothing_but_the_token_is_a_clear_400(self) -> None:
        for data in [{"allow": "Authorize"}, {}, {"allow": "Authorize", "redirect_uri": "http://127.0.0.1:9/callback"}]:
            with self.subTest(data=data):
                self.assertEqual(self.post(data).status_code, 400)

    def test_a_consent_post_for_an_unknown_client_is_a_clear_400(self) -> None:
        response = self.post(
            {
                "allow": "Authorize",
                "client_id": "no-such-client",
                "redirect_uri": "http://127.0.0.1:9/callback",
                "response_type": "code",
                "scope": "notes:read",
                "code_challenge": "x" * 43,
                "code_challenge_method": "S256",
            }
        )
        self.assertEqual(response.status_code, 400)


class RegistrationTextTest(NotebookTestCase):
    def register(self, body: bytes):
        with emitted_logs() as logs:
            response = self.client.post("/o/register/", body, content_type="application/json")
        self.assertNotIn("ERROR", logs.getvalue())
        return response

    def test_a_null_or_broken_client_name_is_invalid_metadata(self) -> None:
        before = get_application_model().objects.count()
        for name in ["null", '"\\ud800"', '"a\\u0000b"', '"tab\\there"', json.dumps("x" * 256), "17", "[]"]:
            with self.subTest(name=name):
                body = b'{"client_name": ' + name.encode() + b', "redirect_uris": ["http://127.0.0.1:9/cb"]}'
                response = self.register(body)
                self.assertEqual(response.status_code, 400, response.content)
                self.assertEqual(response.json()["error"], "invalid_client_metadata")
        self.assertEqual(get_application_model().objects.count(), before)

    def test_a_lone_surrogate_in_a_redirect_uri_is_invalid_metadata(self) -> None:
        response = self.register(b'{"redirect_uris": ["http://127.0.0.1:9/\\udc00"]}')
        self.assertEqual(response.status_code, 400, response.content)

    def test_metadata_sent_as_anything_but_json_is_refused_in_words(self) -> None:
        # A multipart body was read by the form middleware first, and DOT's own read of the
        # body then raised RawPostDataException (a 500).
        body = b'{"redirect_uris": ["http://127.0.0.1:9/cb"]}'
        before = get_application_model().objects.count()
        for content_type in ["multipart/form-data; boundary=b", "application/x-www-form-urlencoded", "text/plain"]:
            with self.subTest(content_type=content_type), emitted_logs() as logs:
                response = self.client.generic("POST", "/o/register/", body, content_type=content_type)
                self.assertEqual(response.status_code, 400, response.content)
                self.assertEqual(response.json()["error"], "invalid_client_metadata")
                self.assertIn("Content-Type: application/json", response.json()["error_description"])
                self.assertNotIn("ERROR", logs.getvalue())
        self.assertEqual(get_application_model().objects.count(), before)
        for content_type in ["application/json; charset=utf-8", "application/merge-patch+json"]:
            with self.subTest(content_type=content_type):
                response = self.client.generic("POST", "/o/register/", body, content_type=content_type)
                self.assertEqual(response.status_code, 201, response.content)


class LiveHostileCase(LiveServerTestCase):
    def setUp(self) -> None:
        self.user = self.make_user("alice")
        self.client = httpx2.Client(base_url=self.live.base_url, timeout=20, follow_redirects=False)
        self.addCleanup(self.client.close)

    def sign_in(self) -> str:
        page = self.client.get("/accounts/login/")
        csrf = page.cookies.get("csrftoken") or self.client.cookies["csrftoken"]
        response = self.client.post(
            "/accounts/login/",
            data={"login": "alice", "password": "alice-password", "csrfmiddlewaretoken": csrf},
            headers={"Referer": self.live.base_url + "/accounts/login/"},
        )
        self.assertEqual(response.status_code, 302, response.text[:300])
        return self.client.cookies["csrftoken"]


class OtherCharsetTest(LiveHostileCase):
    def test_form_bodies_in_utf_16_are_a_clear_4xx_not_an_asgi_exception(self) -> None:
        csrf = self.sign_in()
        entry = services.entry_save(
            codex=services.codex_for_user(user=self.user), request_id="r", data=parse_entry_input({"content": "c"})
        )
        targets = [
            "/accounts/login/",
            "/o/token/",
            "/o/revoke_token/",
            "/o/introspect/",
            "/o/authorize/",
            reverse("mycodex:delete", args=[entry.id]),
            reverse("mycodex:clear"),
            reverse("mycodex:import"),
        ]
        for charset in ("utf-16", "utf-32", "utf-16-le", "cp037"):
            for path in targets:
                with self.subTest(path=path, charset=charset), emitted_logs() as logs:
                    body = f"csrfmiddlewaretoken={csrf}&grant_type=x".encode(charset)
                    response = self.client.post(
                        path,
                        content=body,
                        headers={
                            "Content-Type": f"application/x-www-form-urlencoded; charset={charset}",
                            "Referer": self.live.base_url + path,
                            "X-CSRFToken": csrf,
                        },
                    )
                    self.assertIn(response.status_code, {400, 415}, response.text[:300])
                    self.assertNotIn("ERROR", logs.getvalue())
                    self.assertNotIn("Traceback", logs.getvalue())
        self.assertTrue(Entry.objects.filter(pk=entry.id).exists())


class LyingContentLengthTest(LiveHostileCase):
    def test_a_declared_terabyte_is_refused_at_once_with_413(self) -> None:
        for path in ["/codex/import/", "/accounts/login/", "/o/token/", "/o/register/", "/mcp"]:
            with self.subTest(path=path):
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.live.port}\r\n"
                    "Content-Type: multipart/form-data; boundary=x\r\nContent-Length: 1000000000000\r\n\r\n"
                ).encode()
                answer, took = raw_request(self.live.port, head, b"abcdef", wait=10)
                self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:200])
                self.assertLess(took, 5)
                # Not worth reading on: the connection closes with the answer.
                self.assertIn(b"connection: close", answer.lower())

    def test_a_client_that_sends_all_of_an_oversized_body_reads_its_413(self) -> None:
        # The whole body goes out at once, as a client that does not wait for an answer sends
        # it. A server that answered and closed with most of it unread would reset the
        # connection, and the client, still sending, would get the reset instead of the 413.
        body = b"x" * (32 * 1024 * 1024)
        for path in ["/mcp", "/accounts/login/"]:
            with self.subTest(path=path):
                head = (
                    f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.live.port}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
                ).encode()
                answer, _ = raw_request(self.live.port, head, body, wait=30)
                self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:200])
                self.assertNotIn(b"connection: close", answer.lower())

    def test_a_chunked_client_that_sends_all_of_an_oversized_body_reads_its_413(self) -> None:
        with self.settings(CODEX_BODY_MAX_BYTES=1000):
            head = (
                f"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1:{self.live.port}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
            ).encode()
            chunk = b"100000\r\n" + b"a" * 0x100000 + b"\r\n"
            answer, _ = raw_request(self.live.port, head, chunk * 32 + b"0\r\n\r\n", wait=30)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:200])

    def test_a_client_that_waits_to_be_told_to_send_is_refused_and_closed(self) -> None:
        # Expect: 100-continue: the client sends nothing more until told to, so the answer
        # closes the connection and nothing is left to read.
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.live.port}\r\nExpect: 100-continue\r\n"
            f"Content-Type: application/json\r\nContent-Length: {2 * 1024 * 1024}\r\n\r\n"
        ).encode()
        answer, took = raw_request(self.live.port, head, wait=10)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:200])
        self.assertIn(b"connection: close", answer.lower())
        self.assertLess(took, 5)

    def test_a_body_that_never_finishes_gets_408(self) -> None:
        with self.settings(CODEX_BODY_TIMEOUT_SECONDS=1):
            head = (
                f"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1:{self.live.port}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
            ).encode()
            answer, took = raw_request(self.live.port, head, b"user", wait=10)
        self.assertTrue(answer.startswith(b"HTTP/1.1 408"), answer[:200])
        self.assertLess(took, 5)

    def test_a_chunked_body_past_the_limit_is_cut_off_with_413(self) -> None:
        with self.settings(CODEX_BODY_MAX_BYTES=1000):
            head = (
                f"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1:{self.live.port}\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\nTransfer-Encoding: chunked\r\n\r\n"
            ).encode()
            chunk = b"800\r\n" + b"a" * 0x800 + b"\r\n"
            answer, _ = raw_request(self.live.port, head, chunk, wait=10)
        self.assertTrue(answer.startswith(b"HTTP/1.1 413"), answer[:200])


class ClientMistakesAreQuietTest(NotebookTestCase):
    def test_password_reset_is_not_offered_without_an_email_backend(self) -> None:
        with emitted_logs() as logs:
            response = self.client.post("/accounts/password_reset/", {"email": "alice@example.com"})
        self.assertEqual(response.status_code, 404)
        self.assertNotIn("ERROR", logs.getvalue())

    def test_client_mistakes_are_one_line_without_a_traceback(self) -> None:
        self.client.force_login(self.alice)
        cases = {
            "bad host": lambda: self.client.get("/", HTTP_HOST="evil.example"),
            "too many fields": lambda: self.client.post(
                "/accounts/login/",
                "&".join(f"f{i}=1" for i in range(1_100)),
                content_type="application/x-www-form-urlencoded",
            ),
            "oversized field": lambda: self.client.post(
                "/accounts/login/", "f=" + "a" * 3_000_000, content_type="application/x-www-form-urlencoded"
            ),
            "broken multipart": lambda: self.client.post(
                "/accounts/login/",
                b"--x\r\nContent-Disposition: form-data\r\n",
                content_type="multipart/form-data; boundary=x",
            ),
            "multipart without a boundary": lambda: self.client.post(
                "/accounts/login/", b"a", content_type="multipart/form-data"
            ),
            "multipart with a bad boundary": lambda: self.client.post(
                "/accounts/login/", b"a", content_type="multipart/form-data; boundary=\x01"
            ),
        }
        for name, send in cases.items():
            with self.subTest(name), emitted_logs() as logs:
                self.assertLess(send().status_code, 500)
            text = logs.getvalue()
            self.assertNotIn("ERROR", text, name)
            self.assertNotIn("Traceback", text, name)
            self.assertLessEqual(len(text.strip().splitlines()), 1, text)
        assert_consistent(self)


class WebSocketTest(LiveHostileCase):
    def test_a_websocket_upgrade_is_refused_without_an_error(self) -> None:
        headers = {
            "Connection": "Upgrade",
            "Upgrade": "websocket",
            "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        }
        for path in ["/", "/mcp", "/codex/"]:
            with self.subTest(path=path), emitted_logs() as logs:
                response = httpx2.get(self.live.base_url + path, headers=headers, timeout=10)
                self.assertLess(response.status_code, 500)
                self.assertNotIn("ERROR", logs.getvalue())


class NulCharacterTest(NotebookTestCase):
    """PostgreSQL refuses U+0000 even in a comparison: every lookup that could receive it
    was a 500 there (on SQLite these passed already)."""

    def test_u0000_in_any_text_of_a_request_is_a_400_before_any_lookup(self) -> None:
        root = get_user_model().objects.create_superuser("root", password="root-password")
        admin = Client()
        admin.force_login(root)
        basic = "Basic " + base64.b64encode(b"\x00:secret").decode()
        cases = [
            (self.client, "get", "/o/authorize/?client_id=%00&response_type=code", {}),
            (self.client, "post", "/o/token/", {"data": {"grant_type": "authorization_code", "code": "\x00"}}),
            (self.client, "post", "/o/token/", {"data": {"grant_type": "refresh_token"}, "HTTP_AUTHORIZATION": basic}),
            (self.client, "post", "/o/revoke_token/", {"data": {"token": "a", "client_id": "\x00"}}),
            (self.client, "get", "/o/register/%00/", {"HTTP_AUTHORIZATION": "Bearer x"}),
            (admin, "get", "/admin/notebook/entry/?q=%00", {}),
            (admin, "get", "/admin/oauth2_provider/application/?q=a%00", {}),
            (admin, "get", "/admin/auth/user/%00/change/", {}),
        ]
        for client, method, path, extra in cases:
            with self.subTest(path=path, extra=extra), emitted_logs() as logs:
                response = getattr(client, method)(path, **extra)
                self.assertEqual(response.status_code, 400, response.content[:200])
                self.assertEqual(logs.errors(), [])


class LogLevelRuleTest(SimpleTestCase):
    """The filter on the log handler: a client's mistake is one WARNING line; the server's
    own faults and the outage rule's records pass unchanged."""

    def record(self, level: int, message: str, *, status: int | None = None, error: BaseException | None = None):
        record = logging.LogRecord("tests.client_mistakes", level, __file__, 1, message, None, None)
        if error is not None:
            record.exc_info = (type(error), error, None)
        if status is not None:
            record.status_code = status
        return record

    def test_a_client_mistake_becomes_one_warning_line_without_a_traceback(self) -> None:
        for record in [
            self.record(
                logging.ERROR, "Invalid HTTP_HOST header: 'evil'.\nYou may need…", status=400, error=ValueError()
            ),
            self.record(logging.WARNING, "Bad request: /x", error=MultiPartParserError("Invalid boundary")),
            self.record(logging.ERROR, "Too many fields", error=TooManyFieldsSent("x")),
        ]:
            with self.subTest(record.msg):
                self.assertTrue(ClientMistakesAreWarnings().filter(record))
                self.assertEqual((record.levelno, record.levelname), (logging.WARNING, "WARNING"))
                self.assertIsNone(record.exc_info)
                self.assertNotIn("\n", record.getMessage())

    def test_server_faults_and_outages_keep_their_level_and_traceback(self) -> None:
        fault = self.record(logging.ERROR, "Internal Server Error: /", status=500, error=RuntimeError("boom"))
        outage = self.record(logging.WARNING, "database unavailable: …", error=OperationalError("down"))
        for record, level in [(fault, logging.ERROR), (outage, logging.WARNING)]:
            with self.subTest(record.msg):
                self.assertTrue(ClientMistakesAreWarnings().filter(record))
                self.assertEqual(record.levelno, level)
                self.assertIsNotNone(record.exc_info)
