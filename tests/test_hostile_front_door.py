"""The OAuth front door (issue 54): how a client proves who it is. Each finding of the attack
round, reproduced:

- introspection checks its list against the client whose credentials were verified, never the
  Basic header's id while the body's credentials are what passed;
- a client's secret is hashed at most the failures' limit a minute, however many wrong ones come,
  at once or not, and past it the right one is refused unchecked from the networks that failed,
  while the client's own network still gets in;
- credentials in two places are refused (RFC 6749 §2.3), and a body ``client_id`` beside Basic
  credentials naming another client is ``invalid_request``, not ``server_error``.
"""

import base64
import datetime as dt
import threading
import time
import unittest

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
from tests.live import LiveServerTestCase
from tests.oauth_helpers import REDIRECT_URI

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
