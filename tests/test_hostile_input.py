"""Generated hostile input on every surface that takes input, besides /mcp (which has
tests/test_mcp_bad_input.py): each page's query parameters, each form, the import
upload, the OAuth endpoints (authorize GET and POST, token, revoke, introspect,
registration and its management endpoint) and the admin's search and filters; and, over
real HTTP, wrong charsets, lying Content-Length, slow bodies, wrong methods and bad Hosts.

Values come from hypothesis strategies built from the limits the views enforce
(``notebook.limits`` and the registration guard's), mixed with a table of known nasty
cases. After every call: no 5xx, no ERROR line and no traceback in what the configured log
handlers emitted, and a database that only the services could have written
(``tests.hostile``). Each example runs in its own transaction (hypothesis's Django
``TestCase``), so one example's writes never feed the next and a failure replays.

The run is bounded and reproducible (``derandomize``; no example database):
``CODEX_HOSTILE_EXAMPLES`` examples per test (default 20), plus the table's every case
on each parameter of its surface. A long run, with the calls sent
per surface printed at the end:

    CODEX_HOSTILE_EXAMPLES=500 .venv/bin/python manage.py test tests.test_hostile_input
"""

import base64
import collections
import copy
import functools
import json
import os
import sys
import uuid
from typing import Any
from urllib.parse import quote_from_bytes

import httpx2
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase
from oauth2_provider.models import get_application_model

from authserver.clients.redirect_uris import REDIRECT_URI_MAX_CHARS
from authserver.clients.registration import CLIENT_NAME_MAX_CHARS
from notebook import services, transfer
from notebook.limits import (
    CURSOR_MAX_CHARS,
    IMPORT_EARLIEST_TIME,
    MAX_BIGINT,
    MAX_SAFE_INTEGER,
    QUERY_MAX_CHARS,
    RELATED_AGENT_MAX_CHARS,
    TAG_MAX_CHARS,
    TITLE_MAX_CHARS,
    WRITER_FIELD_MAX_CHARS,
)
from notebook.models import Entry, EntryRevision
from notebook.validation import parse_entry_input
from tests.base import connect_application
from tests.hostile import assert_consistent, emitted_logs, raw_request
from tests.live import LiveServerTestCase
from tests.oauth_helpers import pkce_pair

EXAMPLES = int(os.environ.get("CODEX_HOSTILE_EXAMPLES", "20"))
HOSTILE = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
CALLS: collections.Counter[str] = collections.Counter()
REDIRECT_URI = "http://127.0.0.1:9/callback"
FORM = "application/x-www-form-urlencoded"
CSRF_SECRET = "A" * 32  # a 32-character CSRF secret works unmasked as both cookie and field

# --- the table of known nasty cases -------------------------------------------------------

NASTY_TEXTS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "\udfff",
    "a\udc80b",
    "\x07\x1b[31m",
    "\r\nSet-Cookie: x=1",
    "\u2028",
    "\u202e",
    "\ufeff",
    "\uffff",
    "²",
    "١٢",
    "\uff11",  # FULLWIDTH DIGIT ONE
    "\U0001d7d9",  # MATHEMATICAL DOUBLE-STRUCK DIGIT ONE
    "-1",
    "+1",
    " 1",
    "1_000",
    "1e9",
    "0x10",
    "NaN",
    "Infinity",
    "null",
    "true",
    "[]",
    "{}",
    "0" * 40,
    "9" * 30,
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "%00",
    "%ff",
    "../../etc/passwd",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-01:00",
    "1969-12-31T23:59:59.999Z",
    IMPORT_EARLIEST_TIME,
    "2026-13-45T25:61:61Z",
    "11111111-1111-4111-8111-111111111111",
    "11111111-1111-1111-8111-111111111111",
    "11111111-1111-4111-8111-11111111111\n",
    "a" * 300,
    "é" * 70_000,
]
INTEGER_EDGES = [0, 1, -1, 2**31 - 1, 2**31, MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, MAX_BIGINT, MAX_BIGINT + 1, 10**30]
# The text limits the views enforce: a value just inside, at and just past each.
TEXT_LIMITS = [
    TAG_MAX_CHARS,
    TITLE_MAX_CHARS,
    QUERY_MAX_CHARS,
    WRITER_FIELD_MAX_CHARS,
    CLIENT_NAME_MAX_CHARS,
    RELATED_AGENT_MAX_CHARS,
    REDIRECT_URI_MAX_CHARS,
    CURSOR_MAX_CHARS,
]

any_char = st.characters(codec=None)  # every code point, surrogates and controls included
near_limit = st.sampled_from(TEXT_LIMITS).flatmap(
    lambda limit: st.text(alphabet=st.sampled_from("aé\x00 \ud800"), min_size=limit - 1, max_size=limit + 1)
)
hostile_text = st.one_of(
    st.sampled_from(NASTY_TEXTS),
    st.text(alphabet=any_char, max_size=24),
    st.sampled_from(INTEGER_EDGES).map(str),
    near_limit,
)
hostile_json = st.recursive(
    st.none() | st.booleans() | st.sampled_from(INTEGER_EDGES) | st.floats(allow_nan=False) | hostile_text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(hostile_text, children, max_size=4),
    max_leaves=10,
)
NASTY_JSON_BODIES = [
    b"",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 5_000 + b"1" + b"}" * 5_000,
    b"[NaN, Infinity]",
    b"1" * 5_000,
    b'{"a": 1, "a": 2}',
    b"\xef\xbb\xbf{}",
    '{"client_name": "x"}'.encode("utf-16"),
    b'"\\ud800"',
    b"\xff\xfe",
    b"{" * 10,
]


# What a client may claim its body is: each OAuth endpoint is sent each (with each kind of body).
CONTENT_TYPES = [
    "application/json",
    "application/json; charset=utf-8",
    "application/json; charset=utf-16",
    "application/json; charset=nonsense",
    "application/merge-patch+json",
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=utf-16",
    "multipart/form-data; boundary=b",
    "multipart/form-data",
    "multipart/form-data; boundary=",
    "multipart/mixed; boundary=b",
    "text/plain",
    "application/jwt",
    "*/*",
    "",
    "\x00",
]


BASIC_CREDENTIALS = [
    base64.b64encode(raw).decode()
    for raw in [b"\x00:x", b"a%00b:x", b":", b"\xff\xfe:\x00", b"x" * 3000 + b":y", b"\xed\xa0\x80:x"]
] + ["=", "!!!", "\x00"]


def footprint() -> tuple[int, int, int]:
    return (Entry.objects.count(), EntryRevision.objects.count(), get_application_model().objects.count())


def encoded(text: str) -> bytes:
    """A text as a client would put it on the wire (a lone surrogate as its WTF-8 bytes)."""
    return text.encode("utf-8", "surrogatepass")


def form_body(pairs: list[tuple[str, str]]) -> bytes:
    """An application/x-www-form-urlencoded body (or query string), each byte escaped."""
    return b"&".join(
        quote_from_bytes(encoded(key), safe=b"").encode() + b"=" + quote_from_bytes(encoded(value), safe=b"").encode()
        for key, value in pairs
    )


def parameters(names: list[str]) -> st.SearchStrategy[list[tuple[str, str]]]:
    """Query or form pairs: the view's own parameter names (and some others) with hostile values."""
    return st.lists(st.tuples(st.sampled_from(names) | hostile_text, hostile_text), max_size=5)


def csrf_modes() -> st.SearchStrategy[str]:
    return st.sampled_from(["valid", "missing", "garbled", "other-secret"])


def csrf_field(mode: str) -> list[tuple[str, str]]:
    """The form's CSRF field in each of ``csrf_modes()``."""
    return {
        "valid": [("csrfmiddlewaretoken", CSRF_SECRET)],
        "missing": [],
        "garbled": [("csrfmiddlewaretoken", "\x00" + CSRF_SECRET[1:])],
        "other-secret": [("csrfmiddlewaretoken", "B" * 32)],
    }[mode]


def signed_in_client(user, csrf: str = "valid") -> Client:
    """A browser signed in as ``user`` that enforces CSRF, with the cookie unless ``csrf`` is missing."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    if csrf != "missing":
        client.cookies["csrftoken"] = CSRF_SECRET
    return client


# --- the suite ----------------------------------------------------------------------------


@override_settings(CODEX_DCR_RATE_LIMIT=1_000_000, CODEX_CIMD_RATE_LIMIT=1_000_000)
class HostileInputTest(HypothesisTestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        User = get_user_model()
        cls.alice = User.objects.create_user("alice", password="alice-password")
        cls.bob = User.objects.create_user("bob", password="bob-password")
        cls.root = User.objects.create_superuser("root", password="root-password")
        carol = User.objects.create_user("carol")
        cls.entries = {}
        for user in (cls.alice, cls.bob, carol):
            codex = services.codex_for_user(user=user)
            entry = services.entry_save(
                codex=codex,
                request_id=f"first-{user.pk}",
                data=parse_entry_input({"content": f"{user.username}'s note", "title": "T", "tags": ["t", "ü"]}),
            )
            services.entry_update(
                codex=codex,
                entry_id=entry.id,
                expected_revision=1,
                data=parse_entry_input({"content": "second", "relatedAgentIds": ["agent-1"], "provenance": {"a": [1]}}),
            )
            cls.entries[user.username] = entry.id
        cls.application, cls.alice_token = connect_application(cls.alice, "desk")
        cls.export = json.loads("".join(transfer.export_json_chunks(codex=services.codex_for_user(user=carol))))
        registered = (
            Client()
            .post(
                "/o/register/",
                {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none", "client_name": "reg"},
                content_type="application/json",
            )
            .json()
        )
        cls.registered_id = registered["client_id"]
        cls.registration_token = registered["registration_access_token"]
        cls.verifier, cls.challenge = pkce_pair()

    # Every call goes through here: the checks after it are the point of the suite. A method
    # in capitals is sent with its body's bytes as they are (the client's other methods
    # re-encode a bytes body into the charset its content type names).
    def send(self, surface: str, client: Client, method: str, path: str, **kwargs: Any):
        CALLS[surface] += 1
        before = footprint() if method == "get" else None
        with emitted_logs() as logs:
            call = getattr(client, method) if method.islower() else functools.partial(client.generic, method)
            response = call(path, **kwargs)
            content = b"".join(response.streaming_content) if response.streaming else response.content
        self.assertLess(response.status_code, 500, f"{method.upper()} {path!r}: {content[:300]!r}")
        self.assertEqual(logs.errors(), [], f"{method.upper()} {path!r}")
        self.assertEqual(logs.tracebacks(), [], f"{method.upper()} {path!r}")
        if before is None:
            assert_consistent(self)
        else:  # a GET writes nothing: cheaper to check than the whole database
            self.assertEqual(footprint(), before, f"GET {path!r} wrote")
        return response

    def signed_in(self, user=None, *, csrf: str = "valid") -> Client:
        return signed_in_client(user or self.alice, csrf)

    def csrf_field(self, mode: str) -> list[tuple[str, str]]:
        return csrf_field(mode)

    def post_form(self, surface: str, client: Client, path: str, pairs: list[tuple[str, str]], **extra: Any):
        return self.send(
            surface,
            client,
            "post",
            path,
            data=form_body(pairs),
            content_type="application/x-www-form-urlencoded",
            **extra,
        )

    # --- the person's pages -------------------------------------------------------------

    def page_paths(self) -> list[str]:
        alice, bob = self.entries["alice"], self.entries["bob"]
        return [
            "/",
            reverse("mycodex:list"),
            reverse("mycodex:entry", args=[alice]),
            reverse("mycodex:entry", args=[bob]),
            reverse("mycodex:entry", args=[uuid.uuid4()]),
            reverse("mycodex:export"),
            reverse("mycodex:export_markdown"),
            reverse("mycodex:import"),
            reverse("mycodex:clear"),
            reverse("mycodex:delete", args=[alice]),
            reverse("authserver:clients"),
            "/accounts/login/",
            "/accounts/password_change/",
            "/healthz",
            "/.well-known/oauth-authorization-server/o",
        ]

    @HOSTILE
    @given(
        path=st.integers(0, 14),
        query=parameters(["q", "tag", "agent", "app", "order", "cursor", "from", "to", "revoked", "next"]),
        anonymous=st.booleans(),
    )
    def test_page_query_parameters(self, path: int, query: list[tuple[str, str]], anonymous: bool) -> None:
        client = Client() if anonymous else self.signed_in()
        url = self.page_paths()[path] + "?" + form_body(query).decode()
        self.send("pages: query parameters", client, "get", url)

    def test_each_page_parameter_with_each_nasty_value(self) -> None:
        alice = self.entries["alice"]
        numbers = [*map(str, INTEGER_EDGES), *(text for text in NASTY_TEXTS if len(text) < 50 and not text.isalpha())]
        parameters_of = {
            reverse("mycodex:list"): {"q": NASTY_TEXTS, "tag": NASTY_TEXTS, "agent": NASTY_TEXTS, "app": numbers},
            reverse("mycodex:list") + "?q=a&": {"cursor": NASTY_TEXTS, "order": NASTY_TEXTS},
            reverse("mycodex:entry", args=[alice]) + "?to=2&": {"from": numbers},
            reverse("mycodex:entry", args=[alice]) + "?from=1&": {"to": numbers},
            reverse("authserver:clients"): {"revoked": numbers},
            "/accounts/login/": {"next": NASTY_TEXTS},
            "/o/authorize/?response_type=code&": {"client_id": NASTY_TEXTS},
        }
        client = self.signed_in()
        for path, values_of in parameters_of.items():
            for name, values in values_of.items():
                for value in values:
                    query = form_body([(name, value)]).decode()
                    self.send("pages: query parameters", client, "get", path + ("" if "?" in path else "?") + query)

    @HOSTILE
    @given(older=st.sampled_from(INTEGER_EDGES) | hostile_text, newer=st.sampled_from(INTEGER_EDGES) | hostile_text)
    def test_entry_revision_comparison(self, older: Any, newer: Any) -> None:
        url = reverse("mycodex:entry", args=[self.entries["alice"]])
        query = form_body([("from", str(older)), ("to", str(newer))]).decode()
        self.send("pages: query parameters", self.signed_in(), "get", f"{url}?{query}")

    # --- forms ----------------------------------------------------------------------------

    @HOSTILE
    @given(
        form=st.sampled_from(["login", "logout", "password_change", "clear", "delete", "delete-other", "revoke"]),
        pairs=parameters(["username", "password", "next", "confirmation", "old_password", "new_password1"]),
        csrf=csrf_modes(),
    )
    def test_forms(self, form: str, pairs: list[tuple[str, str]], csrf: str) -> None:
        client = Client(enforce_csrf_checks=True) if form == "login" else self.signed_in(csrf=csrf)
        if form == "login" and csrf != "missing":
            client.cookies["csrftoken"] = CSRF_SECRET
        path = {
            "login": "/accounts/login/",
            "logout": "/accounts/logout/",
            "password_change": "/accounts/password_change/",
            "clear": reverse("mycodex:clear"),
            "delete": reverse("mycodex:delete", args=[self.entries["alice"]]),
            "delete-other": reverse("mycodex:delete", args=[self.entries["bob"]]),
            "revoke": reverse("authserver:revoke", args=[self.application.pk]),
        }[form]
        before = Entry.objects.filter(codex__owner=self.bob).count()
        self.post_form(f"forms: {form}", client, path, self.csrf_field(csrf) + pairs)
        self.assertEqual(Entry.objects.filter(codex__owner=self.bob).count(), before)  # never another's

    @HOSTILE
    @given(application_id=st.sampled_from(INTEGER_EDGES), csrf=csrf_modes())
    def test_revoke_with_any_application_id(self, application_id: int, csrf: str) -> None:
        path = f"/account/clients/{application_id}/revoke/"
        self.post_form("forms: revoke", self.signed_in(csrf=csrf), path, self.csrf_field(csrf))

    # --- the import upload ------------------------------------------------------------------

    def mutated_document(self, data: st.DataObject) -> object:
        document = copy.deepcopy(self.export)
        entry = document["entries"][0]
        target = data.draw(st.sampled_from(["envelope", "entry", "snapshot", "entries", "duplicate"]), label="target")
        value = data.draw(hostile_json | st.sampled_from(NASTY_TEXTS), label="value")
        if target == "envelope":
            document[data.draw(st.sampled_from(["format", "version", "entries", "owner", "extra"]))] = value
        elif target == "entry":
            member = data.draw(st.sampled_from([*entry, "colour"]), label="member")
            if data.draw(st.booleans(), label="delete"):
                entry.pop(member, None)
            else:
                entry[member] = value
        elif target == "snapshot":
            snapshot = entry["revisions"][data.draw(st.integers(0, len(entry["revisions"]) - 1), label="which")]
            member = data.draw(st.sampled_from([*snapshot, "colour"]), label="member")
            snapshot[member] = value
        elif target == "entries":
            document["entries"].append(value)
        else:
            document["entries"].append(copy.deepcopy(entry))
        return document

    def test_each_import_member_with_each_nasty_value(self) -> None:
        values = [None, [], {}, True, -1, 0, MAX_SAFE_INTEGER + 1, 1e308, "", "\x00", "\ud800", "\u00b2"]
        values += [text for text in NASTY_TEXTS if "T" in text or len(text) > 100]  # times, long texts
        entry = self.export["entries"][0]
        for where, members in (("entry", list(entry)), ("snapshot", list(entry["revisions"][-1]))):
            for member in members:
                for value in values:
                    document = copy.deepcopy(self.export)
                    target = document["entries"][0]
                    (target if where == "entry" else target["revisions"][-1])[member] = value
                    self.upload(json.dumps(document).encode())

    @HOSTILE
    @given(data=st.data())
    def test_import_of_mutated_exports(self, data: st.DataObject) -> None:
        document = self.mutated_document(data)
        raw = json.dumps(document).encode()
        self.upload(raw)

    @HOSTILE
    @given(raw=st.sampled_from(NASTY_JSON_BODIES) | st.binary(max_size=200), cut=st.integers(0, 3_000))
    def test_import_of_broken_files(self, raw: bytes, cut: int) -> None:
        whole = json.dumps(self.export).encode()
        self.upload(raw if cut % 3 else whole[:cut] + raw)

    def upload(self, raw: bytes) -> None:
        before = Entry.objects.filter(codex__owner=self.alice).count()
        client = self.signed_in()
        files = {"file": SimpleUploadedFile("codex.json", raw), "csrfmiddlewaretoken": CSRF_SECRET}
        response = self.send("import upload", client, "post", reverse("mycodex:import"), data=files)
        after = Entry.objects.filter(codex__owner=self.alice).count()
        # All or nothing: an applied import created what its report says, a refused one nothing.
        report = response.context["report"] if response.status_code == 200 else None
        self.assertEqual(after - before, report.created if report is not None else 0)

    # --- OAuth --------------------------------------------------------------------------------

    def valid_authorization(self) -> dict[str, str]:
        return {
            "client_id": self.application.client_id,
            "redirect_uri": REDIRECT_URI,
            "response_type": "code",
            "scope": "notes:read notes:write",
            "code_challenge": self.challenge,
            "code_challenge_method": "S256",
            "state": "s",
        }

    def authorization_pairs(self, data: st.DataObject) -> list[tuple[str, str]]:
        """A valid request with some members replaced, dropped or repeated with hostile values."""
        pairs = list(self.valid_authorization().items())
        names = [*self.valid_authorization(), "resource", "prompt", "allow", "nonce", "claims"]
        for _ in range(data.draw(st.integers(0, 3), label="changes")):
            name = data.draw(st.sampled_from(names), label="name")
            action = data.draw(st.sampled_from(["replace", "drop", "repeat"]), label="action")
            if action != "repeat":
                pairs = [(key, value) for key, value in pairs if key != name]
            if action != "drop":
                pairs.append((name, data.draw(hostile_text, label="value")))
        return pairs

    @HOSTILE
    @given(data=st.data(), anonymous=st.booleans())
    def test_authorize_get(self, data: st.DataObject, anonymous: bool) -> None:
        client = Client() if anonymous else self.signed_in()
        query = form_body(self.authorization_pairs(data)).decode()
        self.send("oauth: authorize GET", client, "get", "/o/authorize/?" + query)

    @HOSTILE
    @given(data=st.data(), csrf=csrf_modes())
    def test_authorize_post(self, data: st.DataObject, csrf: str) -> None:
        pairs = [*self.csrf_field(csrf), ("allow", "Authorize"), *self.authorization_pairs(data)]
        self.post_form("oauth: authorize POST", self.signed_in(csrf=csrf), "/o/authorize/", pairs)

    @HOSTILE
    @given(
        grant=st.sampled_from(
            ["authorization_code", "refresh_token", "client_credentials", "password", "implicit", "\x00", ""]
        )
        | hostile_text,
        pairs=parameters(["code", "redirect_uri", "client_id", "code_verifier", "refresh_token", "resource", "scope"]),
        basic=st.none() | hostile_text | st.sampled_from(BASIC_CREDENTIALS),
    )
    def test_token(self, grant: str, pairs: list[tuple[str, str]], basic: str | None) -> None:
        headers = {} if basic is None else {"HTTP_AUTHORIZATION": "Basic " + basic}
        self.post_form("oauth: token", Client(), "/o/token/", [("grant_type", grant), *pairs], **headers)

    @HOSTILE
    @given(pairs=parameters(["token", "token_type_hint", "client_id", "client_secret"]), bearer=st.booleans())
    def test_revoke_and_introspect(self, pairs: list[tuple[str, str]], bearer: bool) -> None:
        headers = {"HTTP_AUTHORIZATION": f"Bearer {self.alice_token}"} if bearer else {}
        self.post_form("oauth: revoke", Client(), "/o/revoke_token/", pairs, **headers)
        self.post_form("oauth: introspect", Client(), "/o/introspect/", pairs, **headers)
        query = form_body(pairs).decode()
        self.send("oauth: introspect", Client(), "get", "/o/introspect/?" + query, **headers)

    def registration_bodies(self) -> st.SearchStrategy[bytes]:
        names = ["redirect_uris", "client_name", "grant_types", "token_endpoint_auth_method", "response_types", "scope"]
        valid = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        changed = st.fixed_dictionaries({}, optional={name: hostile_json for name in names}).map(
            lambda change: json.dumps({**valid, **change}).encode()
        )
        return changed | hostile_json.map(lambda value: json.dumps(value).encode()) | st.sampled_from(NASTY_JSON_BODIES)

    def test_each_registration_member_with_each_nasty_value(self) -> None:
        names = ["redirect_uris", "client_name", "grant_types", "token_endpoint_auth_method", "response_types"]
        values = [None, [], {}, [None], [{}], 17, 1e308, True, *NASTY_TEXTS, [*NASTY_TEXTS[:8]]]
        for name in names:
            for value in values:
                body = json.dumps({"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none", name: value})
                self.send(
                    "oauth: registration", Client(), "post", "/o/register/", data=body, content_type="application/json"
                )
                self.send(
                    "oauth: registration management",
                    Client(),
                    "put",
                    f"/o/register/{self.registered_id}/",
                    data=body,
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {self.registration_token}",
                )

    @HOSTILE
    @given(data=st.data())
    def test_registration(self, data: st.DataObject) -> None:
        body = data.draw(self.registration_bodies(), label="body")
        self.send("oauth: registration", Client(), "post", "/o/register/", data=body, content_type="application/json")

    @HOSTILE
    @given(
        data=st.data(),
        method=st.sampled_from(["get", "put", "delete"]),
        token=st.sampled_from(["valid", "none", "junk"]),
    )
    def test_registration_management(self, data: st.DataObject, method: str, token: str) -> None:
        body = data.draw(self.registration_bodies(), label="body")
        headers = {"valid": {"HTTP_AUTHORIZATION": f"Bearer {self.registration_token}"}, "none": {}}.get(
            token, {"HTTP_AUTHORIZATION": "Bearer \x00junk"}
        )
        client_id = data.draw(
            st.sampled_from([self.registered_id]) | hostile_text.filter(lambda t: "/" not in t), label="id"
        )
        path = "/o/register/" + quote_from_bytes(encoded(client_id or "x"), safe=b"") + "/"
        kwargs = {"data": body, "content_type": "application/json"} if method == "put" else {}
        self.send("oauth: registration management", Client(), method, path, **kwargs, **headers)

    # --- every content type on every OAuth endpoint ------------------------------------------

    def oauth_endpoints(self) -> list[tuple[str, str, dict[str, str]]]:
        """(method, path, headers) of each OAuth endpoint that takes a body."""
        registration = {"HTTP_AUTHORIZATION": f"Bearer {self.registration_token}"}
        return [
            ("post", "/o/authorize/", {}),
            ("post", "/o/token/", {}),
            ("post", "/o/revoke_token/", {}),
            ("post", "/o/introspect/", {"HTTP_AUTHORIZATION": f"Bearer {self.alice_token}"}),
            ("post", "/o/register/", {}),
            ("put", f"/o/register/{self.registered_id}/", registration),
        ]

    def content_bodies(self) -> list[bytes]:
        registration = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        return [
            json.dumps(registration).encode(),
            form_body([("grant_type", "authorization_code"), ("code", "x"), ("client_id", "y")]),
            b'--b\r\nContent-Disposition: form-data; name="grant_type"\r\n\r\nrefresh_token\r\n--b--\r\n',
            b"",
            *NASTY_JSON_BODIES[2:6],
        ]

    def test_every_content_type_on_every_oauth_endpoint(self) -> None:
        for method, path, headers in self.oauth_endpoints():
            for content_type in CONTENT_TYPES:
                for body in self.content_bodies():
                    client = self.signed_in() if path == "/o/authorize/" else Client()
                    surface = f"oauth: content types ({path.split('/')[2]})"
                    self.send(surface, client, method.upper(), path, data=body, content_type=content_type, **headers)

    @HOSTILE
    @given(data=st.data())
    def test_generated_content_types_on_every_oauth_endpoint(self, data: st.DataObject) -> None:
        method, path, headers = data.draw(st.sampled_from(self.oauth_endpoints()), label="endpoint")
        content_type = data.draw(st.sampled_from(CONTENT_TYPES) | hostile_text, label="content type")
        body = data.draw(st.sampled_from(self.content_bodies()) | st.binary(max_size=200), label="body")
        surface = f"oauth: content types ({path.split('/')[2]})"
        self.send(surface, Client(), method.upper(), path, data=body, content_type=content_type, **headers)

    # --- the admin ----------------------------------------------------------------------------

    @HOSTILE
    @given(
        page=st.sampled_from(
            ["notebook/entry", "notebook/codex", "notebook/requestkey", "auth/user", "oauth2_provider/application"]
        ),
        query=parameters(["q", "o", "p", "all", "e", "tag", "codex__id__exact", "_to_field", "_popup", "codex"]),
        change=st.none() | hostile_text,
    )
    def test_admin_search_and_filters(self, page: str, query: list[tuple[str, str]], change: str | None) -> None:
        path = f"/admin/{page}/"
        if change is not None:
            path += quote_from_bytes(encoded(change or "x"), safe=b"") + "/change/"
        self.send("admin: search and filters", self.signed_in(self.root), "get", path + "?" + form_body(query).decode())


# --- over real HTTP: what only a server sees ------------------------------------------------

CHARSETS = ["utf-16", "utf-32", "utf-16-le", "cp037", "utf-7", "latin-1", "nonsense", ""]
PATHS = [
    "/",
    "/accounts/login/",
    "/codex/import/",
    "/codex/delete-all/",
    "/o/token/",
    "/o/register/",
    "/o/authorize/",
    "/o/revoke_token/",
    "/mcp",
    "/admin/login/",
]
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "BREW"]


class HostileHTTPTest(LiveServerTestCase):
    """Raw requests to a real uvicorn serving the real application."""

    def setUp(self) -> None:
        self.make_user("alice")

    def head(self, method: str, path: str, headers: dict[str, str]) -> bytes:
        lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.live.port}", "Connection: close"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    def exchange(self, surface: str, head: bytes, body: bytes = b"", *, wait: float = 10) -> bytes:
        CALLS[surface] += 1
        with emitted_logs() as logs:
            answer, _ = raw_request(self.live.port, head, body, wait=wait)
        self.assertRegex(answer[:12], rb"^HTTP/1\.1 [1-4]\d\d", head[:200])
        self.assertEqual(logs.errors(), [], head[:200])
        self.assertEqual(logs.tracebacks(), [], head[:200])
        return answer

    def test_form_bodies_in_every_charset(self) -> None:
        for charset in CHARSETS:
            for path in PATHS:
                for content_type in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=b"):
                    body = "a=1&grant_type=x".encode("utf-16" if charset.startswith("utf-") else "latin-1")
                    headers = {"Content-Type": f"{content_type}; charset={charset}", "Content-Length": str(len(body))}
                    with self.subTest(charset=charset, path=path, content_type=content_type):
                        self.exchange("http: charsets", self.head("POST", path, headers), body)

    def test_every_method_on_every_path(self) -> None:
        for method in METHODS:
            for path in PATHS:
                with self.subTest(method=method, path=path):
                    self.exchange("http: methods", self.head(method, path, {"Content-Length": "2"}), b"{}")

    def test_lying_and_garbled_lengths(self) -> None:
        with self.settings(CODEX_BODY_TIMEOUT_SECONDS=1):
            for path in PATHS:
                for declared, sent in [
                    ("1000000000000", b"abcdef"),
                    ("10", b"abc"),
                    ("99999999999999999999999999", b""),
                ]:
                    with self.subTest(path=path, declared=declared):
                        headers = {"Content-Length": declared, "Content-Type": "application/x-www-form-urlencoded"}
                        self.exchange("http: lying Content-Length", self.head("POST", path, headers), sent)

    def test_broken_multipart_uploads(self) -> None:
        bodies = [
            b'--b\r\nContent-Disposition: form-data; name="file"; filename="c.json"\r\n\r\n{',
            b"--b\r\n\r\n--b--",
            b'--b\r\nContent-Disposition: form-data; name="' + b"a" * 10_000 + b'"\r\n\r\nx\r\n--b--\r\n',
            b"garbage",
        ]
        for body in bodies:
            for boundary in ("b", "", "\x01", "a" * 300):
                headers = {
                    "Content-Type": f"multipart/form-data; boundary={boundary}",
                    "Content-Length": str(len(body)),
                }
                with self.subTest(body=body[:30], boundary=boundary[:10]):
                    self.exchange("http: broken multipart", self.head("POST", "/codex/import/", headers), body)
                    self.exchange("http: broken multipart", self.head("POST", "/accounts/login/", headers), body)

    def test_bad_hosts(self) -> None:
        for host in ["evil.example", "", "127.0.0.1:99999", "[::1", "a" * 300, "127.0.0.1@evil", "xn--"]:
            for path in ("/", "/accounts/login/", "/mcp", "/o/token/"):
                head = f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode()
                with self.subTest(host=host, path=path):
                    self.exchange("http: bad Host", head)
        response = httpx2.get(self.live.base_url + "/healthz", timeout=10)
        self.assertEqual(response.status_code, 200)


def tearDownModule() -> None:
    """With CODEX_HOSTILE_EXAMPLES set (a long run), the calls sent per surface."""
    if "CODEX_HOSTILE_EXAMPLES" in os.environ:
        width = max(map(len, CALLS), default=10)
        lines = [f"{surface:<{width}}  {count:>7}" for surface, count in sorted(CALLS.items())]
        lines.append(f"{'total':<{width}}  {sum(CALLS.values()):>7}")
        sys.stderr.write("\nhostile calls sent per surface (no 5xx, no ERROR line):\n" + "\n".join(lines) + "\n")
