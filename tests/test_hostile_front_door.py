"""The OAuth front door (issue 54): how a client proves who it is, and how every OAuth endpoint reads
what it is sent. Each finding of the attack round, reproduced:

- introspection checks its list against the client whose credentials were verified, never the
  Basic header's id while the body's credentials are what passed;
- a client's secret is hashed at most the failures' limit a minute, however many wrong ones come,
  at once or not, and past it the right one is refused unchecked from the networks that failed,
  while the client's own network still gets in;
- credentials in two places are refused (RFC 6749 §2.3), and a body ``client_id`` beside Basic
  credentials naming another client is ``invalid_request``, not ``server_error``;
- a parameter sent twice, a missing one (``assertion`` for jwt-bearer among them) and an
  Authorization header that cannot be read are ``invalid_request``, never a 500 and never "the
  last copy wins"; a form body in another charset gets the endpoint's own error format;
- the consent form's answers, Deny included, go only to the client's registered redirect URI.
"""

import base64
import datetime as dt
import socket
import threading
import time
import unittest
from urllib.parse import urlencode

import httpx2
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import MD5PasswordHasher
from django.db import connection, transaction
from django.test import Client, TestCase, override_settings
from oauth2_provider.models import get_access_token_model, get_application_model

from authserver.clients import agents
from authserver.core.tokens import mint_access_token
from tests.base import on_postgres
from tests.clocks import one_rate_window
from tests.hostile import emitted_logs
from tests.live import LiveServerTestCase
from tests.oauth_helpers import REDIRECT_URI, forms_of, pkce_pair, query_of

Application = get_application_model()
AccessToken = get_access_token_model()
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
FORM = "application/x-www-form-urlencoded"


class CountingHasher(MD5PasswordHasher):
    """The test runner's fast hasher, counting the secrets it checks: each client-secret check is
    one ``verify``, whatever thread of the process (a live server's too) makes it."""

    checks = 0
    _lock = threading.Lock()

    def verify(self, password: str, encoded: str) -> bool:
        with CountingHasher._lock:
            CountingHasher.checks += 1
        return super().verify(password, encoded)


COUNTING = override_settings(PASSWORD_HASHERS=["tests.test_hostile_front_door.CountingHasher"])


def basic(client_id: str, secret: str) -> str:
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


class FrontDoorTestCase(TestCase):
    """Alice with a token, a headless agent of hers (a confidential client with a secret), a
    resource server the operator lists for introspection, and a confidential client anyone could
    have registered a moment ago."""

    def setUp(self) -> None:
        COUNTING.enable()
        self.addCleanup(COUNTING.disable)
        CountingHasher.checks = 0
        still = one_rate_window()
        still.start()
        self.addCleanup(still.stop)
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.token = mint_access_token(user=self.alice, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        self.agent = agents.agent_create(owner=self.alice, name="nightly", scopes=["notes:read"])
        Application.objects.create(
            client_id="resource-server",
            client_secret="resource-server-secret",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        )
        self.stranger = (
            Client()
            .post(
                "/o/register/",
                {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "client_secret_basic"},
                content_type="application/json",
            )
            .json()
        )

    def token_request(self, data: dict | list, *, address: str = "203.0.113.7", **headers: str):
        return Client(REMOTE_ADDR=address).post("/o/token/", data, **headers)

    def agent_token(self, secret: str | None = None, *, address: str = "203.0.113.7"):
        return self.token_request(
            {"grant_type": "client_credentials"},
            address=address,
            HTTP_AUTHORIZATION=basic(self.agent.client_id, secret or self.agent.secret),
        )

    def introspect(self, body: str, *, address: str = "203.0.113.7", **headers: str):
        return Client(REMOTE_ADDR=address).post("/o/introspect/", body, content_type=FORM, **headers)

    def assert_oauth_error(self, answer, error: str, status: int = 400) -> dict:
        self.assertEqual(answer.status_code, status, answer.content)
        self.assertTrue(answer["Content-Type"].startswith("application/json"), answer["Content-Type"])
        self.assertEqual(answer.json()["error"], error, answer.content)
        self.assertIn("no-store", answer.get("Cache-Control", ""))
        return answer.json()


@override_settings(
    CODEX_INTROSPECTION_CLIENTS=["resource-server"],
    CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT=5,
    CODEX_CLIENT_AUTH_FAILURES_PER_NETWORK=12,
)
class ClientAuthenticationTest(FrontDoorTestCase):
    def test_introspection_checks_its_list_against_the_client_whose_credentials_were_verified(self) -> None:
        body = (
            f"token={self.token}&client_id={self.stranger['client_id']}&client_secret={self.stranger['client_secret']}"
        )
        answer = self.introspect(body, HTTP_AUTHORIZATION=basic("resource-server", "a-wrong-secret"))
        self.assertGreaterEqual(answer.status_code, 400, answer.content)
        self.assertNotIn(b"active", answer.content)
        self.assertNotIn(b"alice", answer.content)
        # The listed resource server, with its own secret, still introspects.
        answer = self.introspect(
            f"token={self.token}", HTTP_AUTHORIZATION=basic("resource-server", "resource-server-secret")
        )
        self.assertEqual(answer.status_code, 200, answer.content)
        self.assertTrue(answer.json()["active"])

    def test_credentials_in_two_places_get_no_token(self) -> None:
        right, wrong = self.agent.secret, "a-wrong-secret"
        for name, data, header in [
            ("wrong Basic, right body secret", {"client_id": self.agent.client_id, "client_secret": right}, wrong),
            ("right Basic, wrong body secret", {"client_id": self.agent.client_id, "client_secret": wrong}, right),
            ("right Basic, right body secret", {"client_secret": right}, right),
            (
                "right Basic and an assertion",
                {"client_assertion_type": ASSERTION_TYPE, "client_assertion": "x.y.z"},
                right,
            ),
            ("a body secret and an assertion", {"client_secret": right, "client_assertion": "x.y.z"}, None),
        ]:
            with self.subTest(name):
                headers = {} if header is None else {"HTTP_AUTHORIZATION": basic(self.agent.client_id, header)}
                if header is None:
                    data = {**data, "client_id": self.agent.client_id}
                answer = self.token_request({"grant_type": "client_credentials", **data}, **headers)
                self.assert_oauth_error(answer, "invalid_request")
                self.assertIn("more than one", answer.json()["error_description"])
        self.assertFalse(AccessToken.objects.filter(application__client_id=self.agent.client_id).exists())

    def test_a_body_client_id_beside_basic_credentials_must_name_the_same_client(self) -> None:
        answer = self.token_request(
            {"grant_type": "client_credentials", "client_id": "resource-server"},
            HTTP_AUTHORIZATION=basic(self.agent.client_id, self.agent.secret),
        )
        self.assert_oauth_error(answer, "invalid_request")
        same = self.token_request(
            {"grant_type": "client_credentials", "client_id": self.agent.client_id},
            HTTP_AUTHORIZATION=basic(self.agent.client_id, self.agent.secret),
        )
        self.assertEqual(same.status_code, 200, same.content)

    def test_wrong_secrets_are_hashed_at_most_the_limit_then_refused_unchecked(self) -> None:
        limit = settings.CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT
        answers = [self.agent_token(f"guess-{number}") for number in range(limit + 5)]
        self.assertEqual([answer.status_code for answer in answers], [401] * limit + [429] * 5)
        self.assertEqual(CountingHasher.checks, limit)
        refused = self.assert_oauth_error(answers[-1], "invalid_client", 429)
        self.assertIn("nothing was checked", refused["error_description"])
        self.assertGreater(int(answers[-1]["Retry-After"]), 0)
        # The right secret from the network that failed: refused too, and not hashed.
        self.assertEqual(self.agent_token().status_code, 429)
        self.assertEqual(CountingHasher.checks, limit)
        # From a network that never failed against the agent (its owner's machine): checked, and in.
        self.assertEqual(self.agent_token(address="198.51.100.20").status_code, 200)

    def test_a_network_gets_at_most_its_limit_of_hashes_across_clients(self) -> None:
        limit = settings.CODEX_CLIENT_AUTH_FAILURES_PER_NETWORK
        clients = [self.agent.client_id, "resource-server", self.stranger["client_id"]]
        for number in range(limit + 6):
            self.token_request(
                {"grant_type": "client_credentials"},
                address="2001:db8:7:7::" + format(number + 1, "x"),  # one /64, many addresses
                HTTP_AUTHORIZATION=basic(clients[number % 3], f"guess-{number}"),
            )
        self.assertEqual(CountingHasher.checks, limit)
        self.assertEqual(self.agent_token(address="2001:db8:7:7::ffff").status_code, 429)
        self.assertEqual(self.agent_token(address="2001:db8:7:8::1").status_code, 200)  # the next /64

    def test_a_strangers_failures_never_lock_a_resource_server_out_of_its_own_network(self) -> None:
        for number in range(3 * settings.CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT):
            self.introspect(
                f"token={self.token}",
                address=f"192.0.2.{number + 1}",  # a stranger with many addresses
                HTTP_AUTHORIZATION=basic("resource-server", f"guess-{number}"),
            )
        answer = self.introspect(
            f"token={self.token}",
            address="198.51.100.5",
            HTTP_AUTHORIZATION=basic("resource-server", "resource-server-secret"),
        )
        self.assertEqual(answer.status_code, 200, answer.content)
        self.assertTrue(answer.json()["active"])


@override_settings(CODEX_INTROSPECTION_CLIENTS=["resource-server"])
class ParametersTest(FrontDoorTestCase):
    def authorize(self, browser: Client, **extra: str):
        verifier, challenge = pkce_pair()
        query = {
            "response_type": "code",
            "client_id": self.public.client_id,
            "redirect_uri": REDIRECT_URI,
            "scope": "notes:read notes:write",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "st-1",
            **extra,
        }
        page = browser.get("/o/authorize/", query)
        fields = next(form for form in forms_of(page.content.decode()) if "client_id" in form["fields"])["fields"]
        return fields, verifier

    def setUp(self) -> None:
        super().setUp()
        self.public = Application.objects.create(
            name="Desk",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
        )
        self.browser = Client()
        self.browser.force_login(self.alice)

    def code(self) -> tuple[str, str]:
        fields, verifier = self.authorize(self.browser)
        redirect = self.browser.post("/o/authorize/", {**fields, "allow": "Authorize"})
        return query_of(redirect["Location"])["code"], verifier

    def code_exchange(self, code: str, verifier: str) -> list[tuple[str, str]]:
        return [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", REDIRECT_URI),
            ("client_id", self.public.client_id),
            ("code_verifier", verifier),
        ]

    def post_pairs(self, path: str, pairs: list[tuple[str, str]], **headers: str):
        return Client(REMOTE_ADDR="203.0.113.9").post(path, urlencode(pairs), content_type=FORM, **headers)

    def test_a_repeated_parameter_of_the_code_grant_is_invalid_request(self) -> None:
        for name in ("code", "client_id", "code_verifier", "redirect_uri", "grant_type"):
            with self.subTest(name):
                code, verifier = self.code()
                pairs = self.code_exchange(code, verifier)
                value = dict(pairs)[name]
                # The first copy is a wrong one: "the last copy wins" would get a token.
                answer = self.post_pairs("/o/token/", [(name, value + "-other"), *pairs])
                self.assert_oauth_error(answer, "invalid_request")
                self.assertIn(name, answer.json()["error_description"])
                # The code was not spent by the refused request.
                self.assertEqual(self.post_pairs("/o/token/", pairs).status_code, 200)

    def test_a_repeated_refresh_token_or_assertion_is_invalid_request(self) -> None:
        code, verifier = self.code()
        refresh = self.post_pairs("/o/token/", self.code_exchange(code, verifier)).json()["refresh_token"]
        grant = [("grant_type", "refresh_token"), ("client_id", self.public.client_id)]
        answer = self.post_pairs("/o/token/", [*grant, ("refresh_token", "other"), ("refresh_token", refresh)])
        self.assert_oauth_error(answer, "invalid_request")
        answer = self.post_pairs(
            "/o/token/",
            [("grant_type", JWT_BEARER), ("assertion", "a.b.c"), ("assertion", "d.e.f")],
            HTTP_AUTHORIZATION=basic(self.agent.client_id, self.agent.secret),
        )
        self.assert_oauth_error(answer, "invalid_request")
        # RFC 8707's resource is the one parameter that may repeat.
        code, verifier = self.code()
        resource = settings.CODEX_RESOURCE_URL
        answer = self.post_pairs(
            "/o/token/", [*self.code_exchange(code, verifier), ("resource", resource), ("resource", resource)]
        )
        self.assertEqual(answer.status_code, 200, answer.content)

    def test_a_missing_parameter_is_invalid_request_never_a_server_error(self) -> None:
        stranger = {"HTTP_AUTHORIZATION": basic(self.stranger["client_id"], self.stranger["client_secret"])}
        for name, pairs, headers in [
            # A client that may present an ID-JAG, without one: an AttributeError (a 500) before.
            ("assertion", [("grant_type", JWT_BEARER)], stranger),
            ("code", [("grant_type", "authorization_code"), ("client_id", self.public.client_id)], {}),
            ("refresh_token", [("grant_type", "refresh_token"), ("client_id", self.public.client_id)], {}),
            ("grant_type", [("scope", "notes:read")], stranger),
        ]:
            with self.subTest(name):
                answer = self.post_pairs("/o/token/", pairs, **headers)
                self.assert_oauth_error(answer, "invalid_request")
                self.assertIn(name, answer.json()["error_description"])

    def test_what_the_site_or_dot_refuses_on_its_own_still_comes_as_an_oauth_error(self) -> None:
        code, verifier = self.code()
        for name, body, content_type in [
            # DOT answers an error raised while the token is saved (invalid_target) with neither
            # a JSON content type nor no-store.
            (
                "two empty resources",
                urlencode([*self.code_exchange(code, verifier), ("resource", ""), ("resource", "")]),
                FORM,
            ),
            # The site's middleware refuses these before any view runs.
            ("a multipart body without a boundary", "grant_type=client_credentials", "multipart/form-data"),
            ("U+0000 in a parameter", "grant_type=client_credentials&scope=%00", FORM),
        ]:
            with self.subTest(name):
                answer = Client().post("/o/token/", body, content_type=content_type)
                self.assertEqual(answer.status_code, 400, answer.content)
                self.assertEqual(answer["Content-Type"], "application/json")
                self.assertIn("no-store", answer["Cache-Control"])
                self.assertIn(answer.json()["error"], {"invalid_request", "invalid_target"})
        page = self.browser.post("/o/authorize/", "client_id=%00", content_type=FORM)
        self.assertEqual(page.status_code, 400)
        self.assertContains(page, "This request cannot be completed", status_code=400)

    def test_a_value_wider_than_the_column_dot_keeps_it_in_is_refused_before_the_consent_page(self) -> None:
        # DOT keeps the challenge and the nonce in its Grant's varchar(128) and varchar(255): on
        # PostgreSQL a longer one was a 500 once the person allowed (the fuzz found it there).
        answer = self.browser.get(
            "/o/authorize/",
            {
                "response_type": "code",
                "client_id": self.public.client_id,
                "redirect_uri": REDIRECT_URI,
                "code_challenge": "a" * 129,
                "code_challenge_method": "S256",
                "state": "st-1",
            },
        )
        self.assertEqual(answer.status_code, 302)
        self.assertEqual(query_of(answer["Location"])["error"], "invalid_request")
        self.assertEqual(query_of(answer["Location"])["state"], "st-1")
        fields, _ = self.authorize(self.browser)
        for name, size in [("code_challenge", 129), ("nonce", 256)]:
            with self.subTest(name):
                answer = self.browser.post("/o/authorize/", {**fields, name: "a" * size, "allow": "Authorize"})
                self.assertNotIn("code=", answer.get("Location", ""))
                self.assertIn("invalid_request", answer.get("Location", "") + answer.content.decode())

    def test_introspection_with_a_repeated_client_id_is_not_answered(self) -> None:
        answer = self.introspect(
            f"token={self.token}&client_id={self.stranger['client_id']}&client_id=resource-server"
            "&client_secret=resource-server-secret"
        )
        self.assert_oauth_error(answer, "invalid_request")

    def test_an_authorization_header_that_cannot_be_read_is_invalid_request_at_every_endpoint(self) -> None:
        # What an ASGI server makes of a header's raw bytes: latin-1 ("é" sent as UTF-8 arrives as "Ã©").
        for header in [
            "Basic Zm9vOmJhcg==\u00c3\u00a9",
            "Basic not-base64!",
            "Basic " + base64.b64encode(b"no-colon").decode(),
            "Basic " + base64.b64encode(b"\xff\xfe:x").decode(),
        ]:
            for path, body in [
                ("/o/token/", "grant_type=client_credentials"),
                ("/o/revoke_token/", f"token={self.token}"),
                ("/o/introspect/", f"token={self.token}"),
            ]:
                with self.subTest(header=header, path=path):
                    answer = Client().post(path, body, content_type=FORM, HTTP_AUTHORIZATION=header)
                    self.assert_oauth_error(answer, "invalid_request")

    def test_the_consent_form_with_a_repeated_field_issues_no_code(self) -> None:
        for name, other in [
            ("client_id", self.agent.client_id),
            ("redirect_uri", "https://evil.example/cb"),
            ("scope", "notes:read"),
        ]:
            with self.subTest(name):
                fields, _ = self.authorize(self.browser)
                pairs = [(name, other), *fields.items(), ("allow", "Authorize")]
                answer = self.browser.post("/o/authorize/", urlencode(pairs), content_type=FORM)
                location = answer.get("Location", "")
                self.assertNotIn("code=", location)
                self.assertNotIn("evil.example", location)
                self.assertLess(answer.status_code, 500)

    def test_deny_goes_only_to_the_registered_redirect_uri(self) -> None:
        fields, _ = self.authorize(self.browser)
        answer = self.browser.post("/o/authorize/", {**fields, "redirect_uri": "https://evil.example/cb"})
        self.assertNotIn("evil.example", answer.get("Location", ""))
        self.assertEqual(answer.status_code, 400)
        # Deny with the registered one goes back to the client, with state and iss.
        fields, _ = self.authorize(self.browser)
        denied = self.browser.post("/o/authorize/", fields)
        self.assertEqual(denied.status_code, 302)
        self.assertEqual(
            query_of(denied["Location"]), {"error": "access_denied", "state": "st-1", "iss": settings.CODEX_ISSUER_URL}
        )


class FrontDoorHTTPTest(LiveServerTestCase):
    """What only a server sees: a header's raw bytes, a body's declared charset."""

    def setUp(self) -> None:
        self.alice = self.make_user("alice")

    def send(self, path: str, headers: dict[str, bytes], body: bytes) -> tuple[int, bytes, bytes]:
        """POST the bytes as they are; the whole answer (the server closes the connection)."""
        lines = [f"POST {path} HTTP/1.1".encode(), f"Host: 127.0.0.1:{self.live.port}".encode(), b"Connection: close"]
        lines += [name.encode() + b": " + value for name, value in headers.items()]
        lines.append(b"Content-Length: " + str(len(body)).encode())
        chunks = []
        with emitted_logs() as logs, socket.create_connection(("127.0.0.1", self.live.port), timeout=20) as sock:
            sock.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + body)
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        self.assertEqual(logs.errors(), [], path)
        head, _, content = b"".join(chunks).partition(b"\r\n\r\n")
        return int(head[9:12]), head, content

    def test_a_non_ascii_byte_in_a_basic_header_is_invalid_request(self) -> None:
        for path in ("/o/token/", "/o/revoke_token/", "/o/introspect/"):
            with self.subTest(path):
                status, head, content = self.send(
                    path,
                    {"Authorization": b"Basic Zm9vOmJhcg==\xc3\xa9", "Content-Type": FORM.encode()},
                    b"grant_type=client_credentials&token=x",
                )
                self.assertEqual(status, 400, head + content)
                self.assertIn(b'"invalid_request"', content)

    def test_a_form_in_another_charset_gets_each_endpoints_own_error(self) -> None:
        body = "grant_type=client_credentials".encode("utf-16")
        content_type = b"application/x-www-form-urlencoded; charset=utf-16"
        for path in ("/o/token/", "/o/revoke_token/", "/o/introspect/"):
            with self.subTest(path):
                status, head, content = self.send(path, {"Content-Type": content_type}, body)
                self.assertEqual(status, 400, head + content)
                self.assertIn(b"application/json", head.lower())
                self.assertIn(b'"invalid_request"', content)
        status, head, content = self.send("/o/authorize/", {"Content-Type": content_type}, body)
        self.assertEqual(status, 400, head + content)
        self.assertIn(b"text/html", head.lower())
        self.assertIn(b"This request cannot be completed", content)


@unittest.skipUnless(on_postgres(), "row locks: SQLite serialises every write, so no two attempts interleave")
class ConcurrentGuessesTest(LiveServerTestCase):
    """However many wrong secrets arrive at once, no more than the limit are hashed: the test holds
    the lock of the counter the attempts take, waits until PostgreSQL shows them waiting for it
    (never a sleep), and lets go. A check that read the count without taking the row would let
    every one of them through while the test holds it."""

    def wait_until_someone_waits_for_a_lock(self, workers: list[threading.Thread]) -> None:
        for _ in range(6000):
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    return
            if not any(worker.is_alive() for worker in workers):
                self.fail("the attempts finished without waiting for the lock the test holds")
            time.sleep(0.01)
        self.fail("no attempt reached the lock in 60 s")

    def test_concurrent_wrong_secrets_get_at_most_the_limit_of_hashes(self) -> None:
        from authserver.core import attempts
        from authserver.models import AttemptCount

        self.enterContext(COUNTING)
        self.enterContext(override_settings(CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT=1_000))
        self.enterContext(one_rate_window())
        alice = self.make_user("alice")
        agent = agents.agent_create(owner=alice, name="nightly", scopes=["notes:read"])
        CountingHasher.checks = 0
        limit = settings.CODEX_CLIENT_AUTH_FAILURES_PER_NETWORK
        window = attempts.Window.of(60)
        key = window.key("client-auth:network:127.0.0.1")
        AttemptCount.objects.create(key=key, count=0, expires_at=window.ends_at)
        answers: list[int] = []
        guess = limit + 10

        def one(number: int) -> None:
            response = httpx2.post(
                self.live.base_url + "/o/token/",
                data={"grant_type": "client_credentials"},
                auth=(agent.client_id, f"guess-{number}"),
                timeout=120,
            )
            answers.append(response.status_code)

        workers = [threading.Thread(target=one, args=(number,)) for number in range(guess)]
        with transaction.atomic():
            AttemptCount.objects.select_for_update().get(key=key)  # what every attempt takes first
            for worker in workers:
                worker.start()
            self.wait_until_someone_waits_for_a_lock(workers)
        for worker in workers:
            worker.join(timeout=120)
        self.assertEqual(CountingHasher.checks, limit)
        self.assertEqual(sorted(answers), [401] * limit + [429] * (guess - limit))
