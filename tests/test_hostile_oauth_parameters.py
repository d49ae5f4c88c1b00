"""Generated requests to every OAuth endpoint and every grant: a valid request, then parameters
repeated, dropped, emptied, made huge or filled with any code point, and the Authorization and
Content-Type headers replaced by broken ones. Each answer is a success, or a 4xx carrying an OAuth
error code in the endpoint's own format: never a 5xx, never an ERROR line or a traceback in what the
configured log handlers emitted. And the front door's rules hold on every one
(``authserver.oauth.parameters``, ``authserver.clients.authentication``):

- a parameter sent twice (``resource`` excepted), a required one missing or empty, a value over the
  limit, an Authorization header that cannot be read or a body that is not a form is
  ``invalid_request`` at the token, revocation and introspection endpoints: never a token;
- credentials in two places are ``invalid_request``, at every endpoint that authenticates a client;
- the authorization endpoint never redirects anywhere but the client's registered redirect URI,
  and never with a code for a request that repeated a parameter.

Known-good clients of every kind are in the database (a public client with a live code and refresh
token, a confidential client, headless agents with a secret and with a key, a resource server
listed for introspection), so that generated requests reach past client lookup. Each example runs
in its own transaction (hypothesis's Django ``TestCase``): a code spent, a token issued or a failure
counted by one is gone for the next.

``CODEX_OAUTH_EXAMPLES`` examples per surface (the default is sized for CI: about a minute per
database); the cases sent per surface are printed at the end. A long run:

    CODEX_OAUTH_EXAMPLES=3000 .venv/bin/python manage.py test tests.test_hostile_oauth_parameters
"""

import base64
import collections
import datetime as dt
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, quote_from_bytes, urlencode, urlsplit

import jwt
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase
from oauth2_provider.models import get_application_model, get_grant_model

from authserver.clients import agents
from authserver.core.tokens import mint_access_token
from tests.hosted_clients import rsa_key
from tests.hostile import emitted_logs
from tests.oauth_helpers import REDIRECT_URI, forms_of, pkce_pair

EXAMPLES = int(os.environ.get("CODEX_OAUTH_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)
CASES: collections.Counter[str] = collections.Counter()
SECONDS: collections.Counter[str] = collections.Counter()
OUTCOMES: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
FORM = "application/x-www-form-urlencoded"
CSRF_SECRET = "A" * 32  # works unmasked as both the cookie and the form field
# The error codes of RFC 6749 §4.1.2.1 and §5.2, RFC 7009, RFC 7591/7592, RFC 6750 and RFC 8707,
# and this server's 429 at registration.
OAUTH_ERRORS = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "invalid_target",
        "unsupported_token_type",
        "unsupported_response_type",
        "access_denied",
        "invalid_client_metadata",
        "invalid_redirect_uri",
        "invalid_token",
        "too_many_requests",
    }
)
LIMIT = 4_096  # authserver.oauth.parameters.MAX_CHARS
JWT_LIMIT = 16_384  # ... MAX_JWT_CHARS
# ... and LIMITS: a JWT's, RFC 7636's for PKCE, DOT's Grant columns for the nonce.
LIMITS = {"assertion": JWT_LIMIT, "client_assertion": JWT_LIMIT, "code_challenge": 128, "code_verifier": 128}
LIMITS |= {"code_challenge_method": 10, "nonce": 255}

# Values: the nasty, any code point, and the sizes just inside and past the limits.
NASTY = ["", " ", "é", "\u202e", "\ufeff", "\ud800", "%00", "a%2Cb", "+", "=", "&", "null", "[]", "\r\n", "\x7f"]
any_text = st.text(alphabet=st.characters(codec=None, blacklist_characters="\x00"), max_size=40)
values = st.one_of(st.sampled_from(NASTY), any_text)


def encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def form_body(pairs: list[tuple[str, str]]) -> bytes:
    return b"&".join(
        quote_from_bytes(encoded(key), safe=b"").encode() + b"=" + quote_from_bytes(encoded(value), safe=b"").encode()
        for key, value in pairs
    )


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


# What the token endpoint cannot go without, per grant: the contract's rule, written out here
# independently of the server's (authserver.oauth.parameters.REQUIRED_BY_GRANT).
GRANT_REQUIRES = {
    "authorization_code": ("code",),
    "refresh_token": ("refresh_token",),
    "client_credentials": (),
    JWT_BEARER: ("assertion",),
}


def token_required(params: dict[str, str]) -> tuple[str, ...]:
    return ("grant_type", *GRANT_REQUIRES.get(params.get("grant_type", ""), ()))


class Request:
    """One generated request and what the rules say of it."""

    def __init__(
        self,
        pairs: list[tuple[str, str]],
        required: tuple[str, ...] | Callable[[dict[str, str]], tuple[str, ...]],
    ) -> None:
        self.pairs = pairs
        self._required = required
        self.authorization: str | None = None
        self.content_type = FORM

    @property
    def repeated(self) -> set[str]:
        names = collections.Counter(name for name, _ in self.pairs)
        return {name for name, count in names.items() if count > 1 and name != "resource"}

    @property
    def required(self) -> tuple[str, ...]:
        if callable(self._required):
            return self._required(dict(self.pairs))
        return self._required

    @property
    def missing(self) -> set[str]:
        present = {name for name, value in self.pairs if value}
        return set(self.required) - present

    @property
    def oversized(self) -> bool:
        return any(len(value) > LIMITS.get(name, LIMIT) for name, value in self.pairs)

    @property
    def unreadable_authorization(self) -> bool:
        header = self.authorization
        if not header:
            return False
        if not header.isascii():
            return True
        scheme, _, credentials = header.strip().partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
        except ValueError:
            return True
        return ":" not in decoded

    @property
    def not_a_form(self) -> bool:
        """Not a form body the endpoint reads (its parameters are then missing, or unreadable)."""
        return self.content_type not in {FORM, FORM + "; charset=utf-8"}

    @property
    def invalid_request(self) -> bool:
        """What the parameters' rule refuses, whatever else the request holds."""
        return bool(self.repeated or self.missing or self.oversized or self.unreadable_authorization or self.not_a_form)


def mutated(data: st.DataObject, pairs: list[tuple[str, str]], names: list[str]) -> list[tuple[str, str]]:
    """``pairs`` with up to four changes: a parameter repeated, dropped, emptied, made huge or given
    any value; or one added."""
    pairs = list(pairs)
    for _ in range(data.draw(st.integers(0, 4), label="changes")):
        name = data.draw(st.sampled_from([*names, "resource", "scope", "state", "extra"]), label="name")
        action = data.draw(st.sampled_from(["repeat", "repeat-same", "drop", "empty", "huge", "value"]), label="action")
        current = [value for key, value in pairs if key == name]
        if action == "repeat-same" and current:
            pairs.append((name, current[0]))
            continue
        if action in {"drop", "empty", "huge", "value"}:
            pairs = [(key, value) for key, value in pairs if key != name]
        if action == "empty":
            pairs.append((name, ""))
        elif action == "huge":
            size = data.draw(st.sampled_from([129, 256, LIMIT, LIMIT + 1, JWT_LIMIT + 1, 100_000]), label="size")
            pairs.append((name, "é" * size if data.draw(st.booleans(), label="wide") else "a" * size))
        elif action in {"value", "repeat"}:
            pairs.append((name, data.draw(values, label="value")))
    if data.draw(st.booleans(), label="shuffle"):
        pairs = data.draw(st.permutations(pairs), label="order")
    return pairs


CONTENT_TYPES = [
    FORM,
    FORM + "; charset=utf-8",
    FORM + "; charset=utf-16",
    "application/json",
    "text/plain",
    "multipart/form-data",
    "",
]


class OAuthFuzzTest(HypothesisTestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        Application = get_application_model()
        User = get_user_model()
        cls.alice = User.objects.create_user("alice", password="alice-password")
        cls.public = Application.objects.create(
            name="Desk",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
        )
        cls.confidential_secret = "confidential-secret"
        cls.confidential = Application.objects.create(
            name="Server app",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            client_secret=cls.confidential_secret,
        )
        Application.objects.create(
            client_id="resource-server",
            client_secret="resource-server-secret",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        )
        cls.secret_agent = agents.agent_create(owner=cls.alice, name="with a secret", scopes=["notes:read"])
        cls.agent_key = rsa_key()
        from cryptography.hazmat.primitives import serialization

        public_pem = (
            cls.agent_key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )
        cls.key_agent = agents.agent_create(
            owner=cls.alice, name="with a key", scopes=["notes:read"], public_key=public_pem
        )
        cls.verifier, challenge = pkce_pair()
        # A code that lives through the run (each example's use of it is rolled back).
        get_grant_model().objects.create(
            user=cls.alice,
            code="fuzz-code",
            application=cls.public,
            expires=timezone.now() + dt.timedelta(days=1),
            redirect_uri=REDIRECT_URI,
            scope="notes:read notes:write",
            code_challenge=challenge,
            code_challenge_method="S256",
        )
        second_verifier, second_challenge = pkce_pair()
        get_grant_model().objects.create(
            user=cls.alice,
            code="refresh-code",
            application=cls.public,
            expires=timezone.now() + dt.timedelta(days=1),
            redirect_uri=REDIRECT_URI,
            scope="notes:read notes:write",
            code_challenge=second_challenge,
            code_challenge_method="S256",
        )
        tokens = Client().post(
            "/o/token/",
            {
                "grant_type": "authorization_code",
                "code": "refresh-code",
                "redirect_uri": REDIRECT_URI,
                "client_id": cls.public.client_id,
                "code_verifier": second_verifier,
            },
        )
        assert tokens.status_code == 200, tokens.content
        cls.refresh_token = tokens.json()["refresh_token"]
        cls.access_token = mint_access_token(user=cls.alice, scopes=["notes:read"], lifetime=dt.timedelta(days=1))
        registered = Client().post(
            "/o/register/",
            {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"},
            content_type="application/json",
        )
        cls.registered_id = registered.json()["client_id"]
        cls.registration_token = registered.json()["registration_access_token"]

    # --- sending, and what every answer must be ---------------------------------------------

    def send(
        self,
        surface: str,
        method: str,
        path: str,
        request: Request | None = None,
        client: Client | None = None,
        **extra: Any,
    ):
        CASES[surface] += 1
        started = time.perf_counter()
        client = client or Client(REMOTE_ADDR="203.0.113.50")
        headers = dict(extra)
        if request is not None and request.authorization is not None:
            headers["HTTP_AUTHORIZATION"] = request.authorization
        with emitted_logs() as logs:
            if request is None:
                response = getattr(client, method)(path, **headers)
            elif method == "get":
                response = client.get(path + "?" + form_body(request.pairs).decode(), **headers)
            else:
                response = client.generic(
                    method.upper(), path, form_body(request.pairs), content_type=request.content_type, **headers
                )
        SECONDS[surface] += time.perf_counter() - started
        OUTCOMES[surface][outcome(response)] += 1
        where = f"{method.upper()} {path} {request.pairs if request else ''}"[:600]
        self.assertLess(response.status_code, 500, f"{where}: {response.content[:300]!r}")
        self.assertEqual(logs.errors(), [], where)
        self.assertEqual(logs.tracebacks(), [], where)
        return response

    def assert_oauth_json(self, response, request: Request, where: str) -> None:
        """The token, revocation and introspection endpoints: a success, or a JSON OAuth error;
        ``invalid_request`` for whatever the parameters' rule refuses."""
        if response.status_code < 400:
            self.assertFalse(
                request.invalid_request,
                f"{where}: {request.pairs} {request.authorization!r} got {response.status_code}",
            )
            return
        self.assertTrue(response["Content-Type"].startswith("application/json"), where)
        body = response.json()
        self.assertIn(body.get("error"), OAUTH_ERRORS, f"{where}: {body}")
        self.assertIn("no-store", response.get("Cache-Control", ""), where)
        if request.invalid_request:
            self.assertEqual(
                (response.status_code, body["error"]), (400, "invalid_request"), f"{where}: {request.pairs} {body}"
            )

    def draw_headers(self, data: st.DataObject, request: Request, good: str | None) -> None:
        """The Authorization header: the client's own, a wrong one, or one that cannot be read;
        and the body's content type."""
        kind = data.draw(
            st.sampled_from(
                ["good", "good", "none", "wrong", "non-ascii", "not-base64", "no-colon", "not-utf8", "bearer", "any"]
            ),
            label="authorization",
        )
        request.authorization = {
            "good": good,
            "none": None,
            "wrong": basic(self.confidential.client_id, "wrong"),
            "non-ascii": (good or basic("x", "y")) + "\u00c3\u00a9",
            "not-base64": "Basic !!!",
            "no-colon": "Basic " + base64.b64encode(b"no-colon").decode(),
            "not-utf8": "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),
            "bearer": "Bearer " + self.access_token,
            "any": None,
        }[kind]
        if kind == "any":
            request.authorization = data.draw(values, label="header").encode("utf-8", "surrogatepass").decode("latin-1")
        if data.draw(st.integers(0, 9), label="odd content type") == 0:
            request.content_type = data.draw(st.sampled_from(CONTENT_TYPES), label="content type")

    # --- the token endpoint, each grant -------------------------------------------------------

    def token_case(self, data: st.DataObject, surface: str, pairs: list[tuple[str, str]], good: str | None) -> None:
        request = Request(
            mutated(data, pairs, [name for name, _ in pairs]),
            token_required,
        )
        self.draw_headers(data, request, good)
        response = self.send(surface, "post", "/o/token/", request)
        self.assert_oauth_json(response, request, surface)
        grants = [value for name, value in request.pairs if name == "grant_type"]
        if response.status_code == 200:
            self.assertIn("access_token", response.json())
        if len(grants) == 1 and grants[0] not in {
            "authorization_code",
            "refresh_token",
            "client_credentials",
            JWT_BEARER,
        }:
            self.assertGreaterEqual(response.status_code, 400)

    @FUZZ
    @given(data=st.data())
    def test_token_authorization_code(self, data: st.DataObject) -> None:
        pairs = [
            ("grant_type", "authorization_code"),
            ("code", "fuzz-code"),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", self.public.client_id),
            ("code_verifier", self.verifier),
        ]
        self.token_case(data, "token: authorization_code", pairs, None)

    @FUZZ
    @given(data=st.data())
    def test_token_refresh_token(self, data: st.DataObject) -> None:
        pairs = [
            ("grant_type", "refresh_token"),
            ("refresh_token", self.refresh_token),
            ("client_id", self.public.client_id),
        ]
        self.token_case(data, "token: refresh_token", pairs, None)

    @FUZZ
    @given(data=st.data(), with_key=st.booleans())
    def test_token_client_credentials(self, data: st.DataObject, with_key: bool) -> None:
        pairs = [("grant_type", "client_credentials"), ("scope", "notes:read")]
        good = None
        if with_key:
            pairs += [("client_assertion_type", ASSERTION_TYPE), ("client_assertion", self.assertion())]
        else:
            good = basic(self.secret_agent.client_id, self.secret_agent.secret)
        self.token_case(data, "token: client_credentials", pairs, good)

    @FUZZ
    @given(data=st.data())
    def test_token_jwt_bearer(self, data: st.DataObject) -> None:
        pairs = [("grant_type", JWT_BEARER), ("assertion", self.unsigned_jwt()), ("scope", "notes:read")]
        good = basic(self.confidential.client_id, self.confidential_secret)
        self.token_case(data, "token: jwt-bearer (ID-JAG)", pairs, good)

    @FUZZ
    @given(
        data=st.data(),
        grant=st.sampled_from(["password", "implicit", "urn:ietf:params:oauth:grant-type:device_code", ""]) | values,
    )
    def test_token_any_grant_type(self, data: st.DataObject, grant: str) -> None:
        pairs = [("grant_type", grant), ("client_id", self.public.client_id), ("code", "fuzz-code")]
        self.token_case(data, "token: other grant types", pairs, None)

    def test_credentials_in_two_places_are_invalid_request_everywhere(self) -> None:
        secret = basic(self.confidential.client_id, self.confidential_secret)
        body = [("client_secret", self.confidential_secret), ("client_assertion", "a.b.c")]
        for path, pairs in [
            ("/o/token/", [("grant_type", "client_credentials")]),
            ("/o/revoke_token/", [("token", self.access_token)]),
            ("/o/introspect/", [("token", self.access_token)]),
        ]:
            for header, extra in [
                (secret, body[:1]),
                (secret, body[1:]),
                (None, [("client_id", self.confidential.client_id), *body]),
            ]:
                with self.subTest(path=path, header=header is not None, extra=extra):
                    request = Request([*pairs, *extra], ())
                    request.authorization = header
                    response = self.send("credentials in two places", "post", path, request)
                    self.assertEqual(response.status_code, 400, response.content)
                    self.assertEqual(response.json()["error"], "invalid_request")

    # --- revocation and introspection ---------------------------------------------------------

    @FUZZ
    @given(data=st.data())
    def test_revocation(self, data: st.DataObject) -> None:
        request = Request(
            mutated(
                data,
                [
                    ("token", self.access_token),
                    ("token_type_hint", "access_token"),
                    ("client_id", self.public.client_id),
                ],
                ["token", "token_type_hint", "client_id", "client_secret"],
            ),
            ("token",),
        )
        self.draw_headers(data, request, None)
        response = self.send("revocation", "post", "/o/revoke_token/", request)
        self.assert_oauth_json(response, request, "revocation")

    @FUZZ
    @given(data=st.data())
    @override_settings(CODEX_INTROSPECTION_CLIENTS=["resource-server"])
    def test_introspection(self, data: st.DataObject) -> None:
        request = Request(
            mutated(
                data,
                [("token", self.access_token), ("token_type_hint", "access_token")],
                ["token", "token_type_hint", "client_id", "client_secret"],
            ),
            ("token",),
        )
        self.draw_headers(data, request, basic("resource-server", "resource-server-secret"))
        response = self.send("introspection", "post", "/o/introspect/", request)
        self.assert_oauth_json(response, request, "introspection")
        if response.status_code == 200:
            self.assertIn(request.authorization, {basic("resource-server", "resource-server-secret")})

    # --- the authorization endpoint and its consent form --------------------------------------

    def authorization_pairs(self) -> list[tuple[str, str]]:
        return [
            ("response_type", "code"),
            ("client_id", self.public.client_id),
            ("redirect_uri", REDIRECT_URI),
            ("scope", "notes:read notes:write"),
            ("code_challenge", pkce_pair()[1]),
            ("code_challenge_method", "S256"),
            ("state", "st-1"),
        ]

    def assert_authorization_answer(self, response, request: Request, where: str) -> None:
        """A page (the consent page, or the error page) or a redirect: to the sign-in page, or to
        the client's registered redirect URI with an error (a code only for a request sent once)."""
        if response.status_code in {301, 302, 303}:
            location = response["Location"]
            if location.startswith("/accounts/login/"):
                return
            self.assertTrue(location.startswith(REDIRECT_URI + "?"), f"{where}: {location[:300]}")
            answer = parse_qs(urlsplit(location).query)
            self.assertEqual(answer.get("iss"), [django_settings.CODEX_ISSUER_URL], location[:300])
            self.assertTrue("error" in answer or "code" in answer, location[:300])
            if request.repeated:
                self.assertNotIn("code", answer, f"{where}: {request.pairs}")
                self.assertEqual(answer.get("error"), ["invalid_request"], location[:300])
        else:
            self.assertIn(response.status_code, {200, 400, 403, 429, 503}, f"{where}: {response.content[:200]!r}")
            self.assertTrue(response["Content-Type"].startswith("text/html"), where)
            if request.repeated or request.missing:
                self.assertNotEqual(response.status_code, 200, f"{where}: {request.pairs}")

    @FUZZ
    @given(data=st.data(), anonymous=st.booleans())
    def test_authorization_request(self, data: st.DataObject, anonymous: bool) -> None:
        pairs = self.authorization_pairs()
        request = Request(mutated(data, pairs, [name for name, _ in pairs]), ("client_id", "response_type"))
        client = Client()
        if not anonymous:
            client.force_login(self.alice)
        response = self.send("authorization: request (GET)", "get", "/o/authorize/", request, client=client)
        self.assert_authorization_answer(response, request, "authorization GET")

    @FUZZ
    @given(data=st.data(), allow=st.booleans())
    def test_consent_form(self, data: st.DataObject, allow: bool) -> None:
        browser = Client(enforce_csrf_checks=True)
        browser.force_login(self.alice)
        browser.cookies["csrftoken"] = CSRF_SECRET
        pairs = [(name, value) for name, value in self.consent_fields().items()]
        names = [
            "client_id",
            "redirect_uri",
            "scope",
            "state",
            "response_type",
            "code_challenge",
            "code_challenge_method",
            "resource",
        ]
        fields = mutated(data, pairs, names)
        fields += [("csrfmiddlewaretoken", CSRF_SECRET)] + ([("allow", "Authorize")] if allow else [])
        request = Request(fields, ("client_id", "redirect_uri", "response_type"))
        if data.draw(st.integers(0, 9), label="odd content type") == 0:
            request.content_type = data.draw(st.sampled_from(CONTENT_TYPES), label="content type")
        response = self.send("authorization: consent form (POST)", "post", "/o/authorize/", request, client=browser)
        self.assert_authorization_answer(response, request, "consent POST")

    def consent_fields(self) -> dict[str, str]:
        if not hasattr(self, "_consent_fields"):
            browser = Client()
            browser.force_login(self.alice)
            page = browser.get("/o/authorize/?" + urlencode(self.authorization_pairs()))
            form = next(form for form in forms_of(page.content.decode()) if "client_id" in form["fields"])
            type(self)._consent_fields = {k: v for k, v in form["fields"].items() if k != "csrfmiddlewaretoken"}
        return dict(self._consent_fields)

    # --- the registration endpoints' headers --------------------------------------------------

    @FUZZ
    @given(data=st.data(), method=st.sampled_from(["get", "put", "delete", "post"]))
    def test_registration_headers(self, data: st.DataObject, method: str) -> None:
        request = Request([], ())
        self.draw_headers(data, request, "Bearer " + self.registration_token)
        body = b'{"redirect_uris": ["' + REDIRECT_URI.encode() + b'"], "token_endpoint_auth_method": "none"}'
        path = "/o/register/" if method == "post" else f"/o/register/{self.registered_id}/"
        headers = {} if request.authorization is None else {"HTTP_AUTHORIZATION": request.authorization}
        CASES["registration: headers"] += 1
        started = time.perf_counter()
        with emitted_logs() as logs:
            response = Client(REMOTE_ADDR="203.0.113.51").generic(
                method.upper(), path, body, content_type="application/json", **headers
            )
        SECONDS["registration: headers"] += time.perf_counter() - started
        OUTCOMES["registration: headers"][outcome(response)] += 1
        self.assertLess(response.status_code, 500, response.content[:300])
        self.assertEqual(logs.errors(), [])
        self.assertEqual(logs.tracebacks(), [])
        if response.status_code >= 400:
            self.assertIn(response.json().get("error"), OAUTH_ERRORS | {"not_found"}, response.content[:300])
        if request.unreadable_authorization:
            self.assertEqual((response.status_code, response.json()["error"]), (400, "invalid_request"))

    # --- helpers ------------------------------------------------------------------------------

    def assertion(self) -> str:
        now = int(time.time())
        claims = {
            "iss": self.key_agent.client_id,
            "sub": self.key_agent.client_id,
            "aud": django_settings.CODEX_ISSUER_URL,
            "iat": now,
            "exp": now + 120,
            "jti": secrets.token_urlsafe(12),
        }
        return jwt.encode(claims, self.agent_key, algorithm="RS256")

    @staticmethod
    def unsigned_jwt() -> str:
        header = base64.urlsafe_b64encode(b'{"alg":"RS256","typ":"oauth-id-jag+jwt"}').rstrip(b"=").decode()
        payload = base64.urlsafe_b64encode(b'{"iss":"https://idp.example","sub":"x"}').rstrip(b"=").decode()
        return f"{header}.{payload}.c2ln"


def outcome(response) -> str:
    """``200``, ``302 error=access_denied``, ``400 invalid_request``: what a case came to."""
    status = response.status_code
    if status in {301, 302, 303}:
        if response["Location"].startswith("/accounts/login/"):
            return f"{status} to sign in"
        query = parse_qs(urlsplit(response["Location"]).query)
        return f"{status} " + ("code" if "code" in query else f"error={query['error'][0]}")
    if status >= 400 and response.get("Content-Type", "").startswith("application/json"):
        return f"{status} {response.json().get('error')}"
    return str(status)


def tearDownModule() -> None:
    """The cases sent per surface, and what they took (the closing note reports them)."""
    if not CASES:
        return
    width = max(map(len, CASES))
    lines = [f"{surface:<{width}}  {count:>7}  {SECONDS[surface]:7.1f} s" for surface, count in sorted(CASES.items())]
    lines.append(f"{'total':<{width}}  {sum(CASES.values()):>7}  {sum(SECONDS.values()):7.1f} s")
    lines.append("what they came to:")
    for surface, outcomes in sorted(OUTCOMES.items()):
        lines.append(f"  {surface}: " + ", ".join(f"{name}: {count}" for name, count in outcomes.most_common()))
    sys.stderr.write(
        f"\nOAuth requests generated per surface (CODEX_OAUTH_EXAMPLES={EXAMPLES}):\n" + "\n".join(lines) + "\n"
    )
