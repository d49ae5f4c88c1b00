"""Work a stranger can make this server do, bounded where it is caused.

- Only the authorization endpoint, under its limit, fetches the metadata document of a client it
  does not know: a thousand unknown documents named at the token endpoint make no fetch and no row.
- A client that cannot hold a secret gets none: no password hash is spent on it.
- Applications made from documents nobody approved expire as unapproved registrations do.
- A document or key set served a byte every half second (a real server on loopback) is given up
  at the fetch's deadline, and real new clients are served meanwhile; a key set that could not be
  fetched is not fetched again for a minute.
- The error page says whether a document was refused or this server was busy.
- Stalled TLS handshakes (a listener that accepts and never answers) from five networks hold
  every fetch slot: a new client's first authorization still gets its document fetched, as a
  fetch past the patience gives its slot up; a fetch younger than the patience keeps it; one
  block of networks holds at most its share; and a slow but working document is served in full
  while nobody else needs its slot.
"""

import base64
import datetime as dt
import threading
import time
import uuid
from types import SimpleNamespace
from unittest import mock

import httpx2
from django.conf import settings
from django.db import connection, connections
from django.test import Client, SimpleTestCase, TestCase, TransactionTestCase, override_settings
from django.utils import timezone
from oauth2_provider.models import get_application_model

from authserver.clients import fetching, registration
from authserver.models import ClientKeys, PendingRegistration
from codex_site.settings import oauth2_provider_settings
from tests.hosted_clients import ASSERTION_TYPE, ChatGPTLike
from tests.live import LiveServerTestCase
from tests.loopback_http import DocumentsServer, StallingListener
from tests.oauth_helpers import REDIRECT_URI, authorization_url, pkce_pair

Application = get_application_model()
DEADLINE = 2  # seconds: the fetch deadline these tests set (CIMD_FETCH_TIMEOUT_SECONDS)
# How long past the deadline an answer may come, for the server's own work on a busy machine.
SLACK = 8


def document(client_id: str, **members) -> dict:
    return {"client_id": client_id, "client_name": "Agent", "redirect_uris": [REDIRECT_URI], **members}


def cache_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM codex_cache")
        return cursor.fetchone()[0]


class TokenEndpointFetchesNothingTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())

    def test_a_thousand_unknown_documents_named_at_the_token_endpoint_make_no_fetch_and_no_row(self) -> None:
        # Real documents a fetch would find and accept.
        client_ids = [f"{self.documents.origin}/agents/{number}.json" for number in range(1_000)]
        for client_id in client_ids:
            self.documents.documents[client_id.removeprefix(self.documents.origin)] = document(client_id)
        rows_before = cache_rows()
        for number, client_id in enumerate(client_ids):
            answer = Client(REMOTE_ADDR=f"198.18.{number // 250}.{number % 250 + 1}").post(
                "/o/token/",
                {
                    "grant_type": "authorization_code",
                    "code": "c",
                    "client_id": client_id,
                    "redirect_uri": REDIRECT_URI,
                    "code_verifier": "v" * 43,
                },
            )
            self.assertEqual(answer.status_code, 401, answer.content)
            self.assertEqual(answer.json()["error"], "invalid_client")
        self.assertEqual(sum(self.documents.fetched.values()), 0)
        self.assertEqual(Application.objects.count(), 0)
        self.assertEqual(ClientKeys.objects.count(), 0)
        self.assertEqual(cache_rows(), rows_before)

    def test_revocation_and_an_assertion_naming_an_unknown_document_fetch_nothing(self) -> None:
        client_id = f"{self.documents.origin}/agents/revoking.json"
        self.documents.documents["/agents/revoking.json"] = document(client_id)
        revoked = Client().post("/o/revoke_token/", {"token": "t", "client_id": client_id})
        self.assertEqual(revoked.status_code, 401, revoked.content)
        chatgpt = ChatGPTLike(self.documents, connector="unknown-connector")
        asserted = Client().post(
            "/o/token/",
            {
                "grant_type": "authorization_code",
                "code": "c",
                "redirect_uri": REDIRECT_URI,
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": chatgpt.assertion(settings.CODEX_ISSUER_URL),
            },
        )
        self.assertEqual(asserted.status_code, 401, asserted.content)
        self.assertEqual(sum(self.documents.fetched.values()), 0)
        self.assertEqual(Application.objects.count(), 0)


@override_settings(CODEX_CIMD_RATE_LIMIT=1_000_000, CODEX_DCR_RATE_LIMIT=1_000_000)
class ClientsWithoutSecretsTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())

    def register(self, method: str):
        answer = Client().post(
            "/o/register/",
            {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": method},
            content_type="application/json",
        )
        self.assertEqual(answer.status_code, 201, answer.content)
        return Application.objects.get(client_id=answer.json()["client_id"]), answer.json()

    def test_a_public_registration_gets_no_secret_and_no_hash(self) -> None:
        with mock.patch("oauth2_provider.models.make_password", side_effect=AssertionError("hashed")):
            application, answer = self.register("none")
        self.assertEqual(application.client_secret, "")
        self.assertNotIn("client_secret", answer)

    def test_a_confidential_registration_still_gets_a_hashed_secret(self) -> None:
        application, answer = self.register("client_secret_basic")
        self.assertTrue(answer["client_secret"])
        self.assertNotEqual(application.client_secret, answer["client_secret"])
        self.assertTrue(application.client_secret.startswith("md5$"))  # the test runner's hasher

    def test_an_application_made_from_a_document_gets_no_secret(self) -> None:
        for name, members in {
            "none": {},
            "private_key_jwt": {"jwks": {"keys": [{"kty": "EC", "crv": "P-256"}]}},
        }.items():
            with self.subTest(name):
                client_id = f"{self.documents.origin}/agents/{name}.json"
                self.documents.documents[client_id.removeprefix(self.documents.origin)] = document(
                    client_id, token_endpoint_auth_method=name, **members
                )
                Client().get(
                    "/o/authorize/",
                    {
                        "response_type": "code",
                        "client_id": client_id,
                        "redirect_uri": REDIRECT_URI,
                        "code_challenge": pkce_pair()[1],
                        "code_challenge_method": "S256",
                    },
                )
                self.assertEqual(Application.objects.get(client_id=client_id).client_secret, "")

    def test_an_empty_secret_authenticates_nobody(self) -> None:
        application, _ = self.register("none")
        answer = Client().post(
            "/o/token/",
            {"grant_type": "authorization_code", "code": "c", "redirect_uri": REDIRECT_URI},
            HTTP_AUTHORIZATION="Basic " + base64.b64encode(f"{application.client_id}:".encode()).decode(),
        )
        self.assertEqual(answer.status_code, 401, answer.content)


@override_settings(CODEX_CIMD_RATE_LIMIT=1_000_000)
class UnapprovedDocumentsExpireTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())

    def test_an_application_made_from_a_document_nobody_approved_is_removed_with_its_keys(self) -> None:
        client_id = f"{self.documents.origin}/agents/never-approved.json"
        self.documents.documents["/agents/never-approved.json"] = document(
            client_id, token_endpoint_auth_method="private_key_jwt", jwks_uri=self.documents.origin + "/jwks.json"
        )
        Client(REMOTE_ADDR="2001:db8:7:7::1").get(
            "/o/authorize/",
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": REDIRECT_URI,
                "code_challenge": pkce_pair()[1],
                "code_challenge_method": "S256",
            },
        )
        self.assertTrue(Application.objects.filter(client_id=client_id).exists())
        self.assertTrue(ClientKeys.objects.filter(client_id=client_id).exists())
        later = timezone.now() + dt.timedelta(seconds=settings.CODEX_DCR_PENDING_SECONDS + 1)
        with mock.patch.object(registration, "timezone", SimpleNamespace(now=lambda: later)):
            self.assertEqual(registration.expire_pending(), 1)
        self.assertFalse(Application.objects.filter(client_id=client_id).exists())
        self.assertFalse(ClientKeys.objects.filter(client_id=client_id).exists())
        self.assertEqual(PendingRegistration.objects.count(), 0)


class KeySetFailureRememberedTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())

    def test_a_key_set_that_could_not_be_fetched_is_not_fetched_again_for_a_while(self) -> None:
        chatgpt = ChatGPTLike(self.documents, connector="broken-keys")
        del self.documents.documents["/oauth/jwks.json"]  # the key set answers 404
        Application.objects.create(
            client_id=chatgpt.client_id,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            registration_source=Application.RegistrationSource.CIMD,
            cimd_expires_at=timezone.now() + dt.timedelta(days=1),
        )
        ClientKeys.objects.create(client_id=chatgpt.client_id, jwks_uri=chatgpt.jwks_uri, signing_algorithm="RS256")
        for _ in range(5):
            answer = chatgpt_token_request(Client(), chatgpt)
            self.assertEqual(answer.status_code, 401, answer.content)
        self.assertEqual(chatgpt.jwks_requests, 1)


def chatgpt_token_request(client, chatgpt: ChatGPTLike):
    return client.post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": "c",
            "redirect_uri": REDIRECT_URI,
            "code_verifier": "v" * 43,
            "client_id": chatgpt.client_id,
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": chatgpt.assertion(settings.CODEX_ISSUER_URL, jti=str(uuid.uuid4())),
        },
    )


class SlowDripTest(LiveServerTestCase):
    """A real HTTPS server on loopback that sends a byte every half second, for as long as anyone listens."""

    def setUp(self) -> None:
        self.documents = self.enterContext(DocumentsServer())
        self.enterContext(
            override_settings(
                OAUTH2_PROVIDER=oauth2_provider_settings(self.live.base_url) | {"CIMD_FETCH_TIMEOUT_SECONDS": DEADLINE}
            )
        )

    def dripping_document(self, name: str, part: str = "body") -> str:
        self.documents.drips[f"/slow/{name}.json"] = part
        return f"{self.documents.origin}/slow/{name}.json"

    def good_document(self, name: str) -> str:
        client_id = f"{self.documents.origin}/good/{name}.json"
        self.documents.documents[f"/good/{name}.json"] = document(client_id)
        return client_id

    def open(self, client_id: str, *, address: str = "127.0.0.1") -> tuple[httpx2.Response, float]:
        """An anonymous authorization request from ``address``: its answer and how long it took."""
        url = authorization_url(
            self.live.base_url, client_id, code_challenge=pkce_pair()[1], code_challenge_method="S256"
        )
        with httpx2.Client(transport=httpx2.HTTPTransport(local_address=address), timeout=DEADLINE * 10) as http:
            started = time.monotonic()
            answer = http.get(url)
            return answer, time.monotonic() - started

    def wait_for(self, condition, what: str) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            self.assertLess(time.monotonic(), deadline, f"never: {what}")
            time.sleep(0.05)

    def test_a_dripping_document_is_given_up_at_the_deadline(self) -> None:
        for part in ("headers", "body"):
            with self.subTest(part):
                answer, took = self.open(self.dripping_document(f"drip-{part}", part))
                self.assertLess(took, DEADLINE + SLACK, f"held {took:.1f} s by a remote sending its {part} slowly")
                self.assertEqual(answer.status_code, 400, answer.text[:500])
                self.assertIn(f"not served in full within {DEADLINE} seconds", answer.text)

    def test_real_new_clients_are_served_while_documents_drip(self) -> None:
        answers: list[int] = []
        attackers = [
            threading.Thread(
                target=lambda n=n: answers.append(self.open(self.dripping_document(f"flood-{n}"))[0].status_code)
            )
            for n in range(12)
        ]
        for attacker in attackers:
            attacker.start()
        self.addCleanup(lambda: [attacker.join() for attacker in attackers])
        self.wait_for(lambda: self.documents.dripping >= 2, "the attacker's documents drip")
        newcomer = self.good_document("newcomer")
        answer, _ = self.open(newcomer, address="127.0.0.2")
        self.assertEqual(answer.status_code, 302, answer.text[:500])  # on to sign in: the document was used
        self.assertIn("/accounts/login/", answer.headers["location"])
        self.assertTrue(Application.objects.filter(client_id=newcomer).exists())
        for attacker in attackers:
            attacker.join()
        self.assertEqual(len(answers), 12)
        self.assertLessEqual(sum(self.documents.fetched.get(f"/slow/flood-{n}.json", 0) for n in range(12)), 12)

    def test_the_page_says_busy_when_the_networks_fetches_are_all_in_use_and_refused_when_refused(self) -> None:
        holders = [threading.Thread(target=self.open, args=(self.dripping_document(f"hold-{n}"),)) for n in range(2)]
        for holder in holders:
            holder.start()
        self.wait_for(lambda: self.documents.dripping >= 2, "two fetches drip")
        waiting = self.good_document("waiting")
        busy, _ = self.open(waiting)
        self.assertEqual(busy.status_code, 503, busy.text[:500])
        self.assertIn("This server is busy", busy.text)
        self.assertIn("Nothing was refused", busy.text)
        self.assertEqual(self.documents.fetched.get("/good/waiting.json", 0), 0)
        for holder in holders:
            holder.join()
        # Nothing was held against it: once the fetches are free, the same document is used.
        served, _ = self.open(waiting)
        self.assertEqual(served.status_code, 302, served.text[:500])
        refused, _ = self.open(f"{self.documents.origin}/missing.json")
        self.assertEqual(refused.status_code, 400)
        self.assertIn("could not be read", refused.text)
        self.assertNotIn("busy", refused.text)

    def test_a_dripping_key_set_is_given_up_at_the_deadline_and_not_fetched_again(self) -> None:
        chatgpt = ChatGPTLike(self.documents, connector="dripping-keys")
        self.documents.drips["/oauth/jwks.json"] = "body"
        Application.objects.create(
            client_id=chatgpt.client_id,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            registration_source=Application.RegistrationSource.CIMD,
            cimd_expires_at=timezone.now() + dt.timedelta(days=1),
        )
        ClientKeys.objects.create(client_id=chatgpt.client_id, jwks_uri=chatgpt.jwks_uri, signing_algorithm="RS256")
        for attempt in range(3):
            started = time.monotonic()
            answer = chatgpt.token_request(
                self.live.base_url,
                {"grant_type": "authorization_code", "code": "c", "redirect_uri": REDIRECT_URI},
                chatgpt.assertion(self.live.base_url + "/o"),
            )
            took = time.monotonic() - started
            self.assertLess(took, DEADLINE + SLACK, f"attempt {attempt}: held {took:.1f} s by a dripping key set")
            self.assertEqual(answer.status_code, 401, answer.text)
        self.assertEqual(chatgpt.jwks_requests, 1)
        self.assertIn("could not be fetched", answer.json()["error_description"])


# Five networks, each a /64 of its own /48, two requests each: ten fetches, every slot.
ATTACKERS = [f"2001:db8:{block:x}:1::{host}" for block in range(1, 6) for host in (1, 2)]
# Ten networks, each in a /48 of its own, one request each.
SPREAD_ATTACKERS = [f"2001:db8:{block:x}:1::1" for block in range(1, 11)]
NEWCOMER = "2001:db8:99:1::1"


def authorize(address: str, client_id: str):
    """An anonymous authorization request from ``address`` naming the document ``client_id``."""
    try:
        return Client(REMOTE_ADDR=address).get(
            "/o/authorize/",
            {
                "response_type": "code",
                "client_id": client_id,
                "redirect_uri": REDIRECT_URI,
                "code_challenge": pkce_pair()[1],
                "code_challenge_method": "S256",
            },
        )
    finally:
        connections.close_all()  # this thread's own


class Answers:
    """The answers of requests sent from threads, and a way to wait for so many of them."""

    def __init__(self) -> None:
        self.pages: list[tuple[int, str]] = []
        self._changed = threading.Condition()
        self.threads: list[threading.Thread] = []

    def send(self, address: str, client_id: str) -> None:
        def request() -> None:
            answer = authorize(address, client_id)
            with self._changed:
                self.pages.append((answer.status_code, answer.content.decode(errors="replace")))
                self._changed.notify_all()

        thread = threading.Thread(target=request)
        thread.start()
        self.threads.append(thread)

    def wait_for(self, count: int) -> None:
        """Until ``count`` answers have arrived (the timeout only ends a test that would hang)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.pages) >= count, timeout=60):
                raise AssertionError(f"only {len(self.pages)} of {count} answers arrived")

    def join(self) -> None:
        for thread in self.threads:
            thread.join()


@override_settings(CODEX_CIMD_RATE_LIMIT=1_000_000, CODEX_FETCHES_AT_ONCE=10)
class StalledHandshakesTest(TransactionTestCase):
    """The attack round's: authorization requests from a handful of networks name documents on a
    server that accepts the connection and never answers the TLS handshake. Nothing here is decided
    by waiting: the deadline is far away (600 s), and the patience is 0 (every fetch under way is
    past it) or an hour (none is)."""

    def setUp(self) -> None:
        self.stalls = self.enterContext(StallingListener())
        self.documents = self.enterContext(DocumentsServer())
        self.enterContext(
            override_settings(
                OAUTH2_PROVIDER=oauth2_provider_settings(settings.CODEX_PUBLIC_URL)
                | {"CIMD_FETCH_TIMEOUT_SECONDS": 600}
            )
        )
        self.attack = Answers()

    def good_document(self, name: str) -> str:
        client_id = f"{self.documents.origin}/good/{name}.json"
        self.documents.documents[f"/good/{name}.json"] = document(client_id)
        return client_id

    def end_the_attack(self) -> None:
        self.stalls.__exit__()  # the stalled handshakes see the connection closed
        self.attack.join()

    def hold_every_slot(self, attackers: list[str]) -> None:
        for number, address in enumerate(attackers):
            self.attack.send(address, f"{self.stalls.origin}/stalled/{number}.json")
        self.stalls.wait_for(len(attackers))  # ten handshakes under way, none answered
        self.assertEqual(fetching.SLOTS.in_use(), settings.CODEX_FETCHES_AT_ONCE)

    def assert_served_and_one_stall_yielded(self, attackers: list[str], *, status: int, words: str) -> float:
        newcomer = self.good_document("newcomer")
        started = time.monotonic()
        answer = authorize(NEWCOMER, newcomer)
        took = time.monotonic() - started
        self.assertEqual(answer.status_code, 302, answer.content[:500])  # on to sign in: the document was used
        self.assertIn("/accounts/login/", answer["Location"])
        self.assertTrue(Application.objects.filter(client_id=newcomer).exists())
        # One stalled fetch gave its slot up: its request ended at once.
        self.attack.wait_for(1)
        [(answered, page)] = self.attack.pages
        self.assertEqual(answered, status, page[:500])
        self.assertIn(words, page)
        self.assertEqual(fetching.SLOTS.in_use(), len(attackers) - 1)  # the other stalls; the newcomer's is done
        return took

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=3600)
    def test_a_new_clients_document_is_fetched_while_stalled_handshakes_from_five_networks_hold_every_slot(
        self,
    ) -> None:
        # The attack round's shape: the five networks' blocks hold two slots each, and a newcomer's
        # block none, so one of theirs gives way at once, however young (the patience is an hour
        # here): as busy, nothing held against its document.
        self.hold_every_slot(ATTACKERS)
        took = self.assert_served_and_one_stall_yielded(ATTACKERS, status=503, words="This server is busy")
        print(
            f"\n{len(ATTACKERS)} stalled handshakes from {len(ATTACKERS) // 2} networks held every slot; "
            f"a new client's document was fetched in {took:.2f} s; 1 stalled fetch gave its slot up"
        )
        self.end_the_attack()

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=0)
    def test_past_the_patience_even_one_stalled_fetch_per_block_gives_its_slot_up(self) -> None:
        self.hold_every_slot(SPREAD_ATTACKERS)
        self.assert_served_and_one_stall_yielded(
            SPREAD_ATTACKERS, status=400, words="when every fetch slot of this server was in use"
        )
        self.end_the_attack()

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=3600)
    def test_fetches_younger_than_the_patience_from_a_block_each_keep_their_slots(self) -> None:
        # What holding every slot costs (docs/architecture.md): one young fetch from each of ten blocks.
        self.hold_every_slot(SPREAD_ATTACKERS)
        newcomer = self.good_document("newcomer")
        busy = authorize(NEWCOMER, newcomer)
        self.assertEqual(busy.status_code, 503, busy.content[:500])
        self.assertIn("This server is busy", busy.content.decode())
        self.assertEqual(self.documents.fetched.get("/good/newcomer.json", 0), 0)
        self.assertEqual(self.attack.pages, [])
        self.end_the_attack()
        self.assertEqual(authorize(NEWCOMER, newcomer).status_code, 302)

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=0)
    def test_one_block_of_networks_holds_at_most_its_share_of_the_slots(self) -> None:
        share = settings.CODEX_FETCHES_AT_ONCE_PER_BLOCK
        # Twice the block's share, from /64s of one /48, two requests from each (its own share).
        for number in range(2 * share):
            self.attack.send(f"2001:db8:7:{number // 2:x}::1", f"{self.stalls.origin}/stalled/{number}.json")
        self.stalls.wait_for(share)
        self.attack.wait_for(share)  # those that found no slot are answered at once
        self.assertEqual(self.stalls.accepted, share)
        self.assertEqual([status for status, _ in self.attack.pages], [503] * share)
        self.assertEqual(fetching.SLOTS.in_use(), share)
        self.end_the_attack()

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=0, CODEX_FETCHES_AT_ONCE=2)
    def test_a_slow_but_working_document_is_served_while_nobody_needs_its_slot(self) -> None:
        slow = self.good_document("slow")
        arrived, let_go = self.documents.hold("/good/slow.json")
        self.attack.send("2001:db8:5:1::1", slow)  # a person connecting a client whose server is slow
        self.assertTrue(arrived.wait(60))
        # Past the patience now; a newcomer that finds a free slot takes it and leaves this one be.
        newcomer = self.good_document("newcomer")
        self.assertEqual(authorize(NEWCOMER, newcomer).status_code, 302)
        let_go.set()
        self.attack.wait_for(1)
        [(status, page)] = self.attack.pages
        self.assertEqual(status, 302, page[:500])
        self.assertTrue(Application.objects.filter(client_id=slow).exists())
        self.end_the_attack()


@override_settings(CODEX_FETCHES_AT_ONCE=2, CODEX_FETCHES_AT_ONCE_PER_ADDRESS=2, CODEX_FETCHES_AT_ONCE_PER_BLOCK=4)
class FetchSlotsTest(SimpleTestCase):
    """The books of the slots (authserver.clients.fetching._Slots), without a network."""

    def setUp(self) -> None:
        self.slots = fetching._Slots()

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=0)
    def test_the_fetch_that_has_run_longest_past_the_patience_gives_its_slot_up(self) -> None:
        oldest, younger = self.slots.take("198.51.100.1"), self.slots.take("198.51.100.2")
        newcomer = self.slots.take("203.0.113.1")
        self.assertIsNotNone(newcomer)
        self.assertEqual((oldest.yielded, younger.yielded, oldest.holding), (True, False, False))
        self.assertEqual(self.slots.in_use(), 2)
        with self.assertRaisesMessage(fetching.FetchYielded, "when every fetch slot"):
            oldest.check()
        self.slots.ended(oldest)  # it ends as too slow: the books do not change again
        self.assertEqual(self.slots.in_use(), 2)

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=3600)
    def test_no_fetch_younger_than_the_patience_from_a_block_of_its_own_gives_its_slot_up(self) -> None:
        held = [self.slots.take("198.51.100.1"), self.slots.take("198.51.101.1")]
        self.assertIsNone(self.slots.take("203.0.113.1"))
        self.assertFalse(any(fetch.yielded for fetch in held))

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=3600)
    def test_a_block_holding_two_slots_more_than_the_newcomers_gives_one_up_however_young(self) -> None:
        older, younger = self.slots.take("198.51.100.1"), self.slots.take("198.51.100.2")  # one /24
        self.assertIsNone(self.slots.take("198.51.100.3"))  # the same block: nothing to even out
        newcomer = self.slots.take("203.0.113.1")
        self.assertIsNotNone(newcomer)
        self.assertEqual((older.yielded, younger.yielded), (True, False))
        with self.assertRaises(fetching.FetchCrowdedOut):  # busy: nothing held against its remote
            older.check()
        # Now one each: the next newcomer from a third block waits.
        self.assertIsNone(self.slots.take("192.0.2.1"))

    @override_settings(CODEX_FETCH_PATIENCE_SECONDS=0, CODEX_FETCHES_AT_ONCE=1)
    def test_a_fetch_still_resolving_yields_only_while_fewer_resolvers_than_slots_linger(self) -> None:
        first = self.slots.take("198.51.100.1")
        self.slots.resolving(first)
        second = self.slots.take("198.51.100.2")  # first's resolver lingers, counted
        self.assertTrue(first.yielded and first.lingering)
        self.slots.resolving(second)
        self.assertIsNone(self.slots.take("198.51.100.3"))  # one lingers already: second keeps its slot
        self.slots.resolved(first)
        third = self.slots.take("198.51.100.3")
        self.assertTrue(second.yielded)
        self.assertIsNotNone(third)

    def test_a_network_and_a_block_hold_at_most_their_shares(self) -> None:
        with override_settings(CODEX_FETCHES_AT_ONCE=10, CODEX_FETCH_PATIENCE_SECONDS=0):
            self.assertIsNotNone(self.slots.take("2001:db8:1:1::/64"))
            self.assertIsNotNone(self.slots.take("2001:db8:1:1::/64"))
            self.assertIsNone(self.slots.take("2001:db8:1:1::/64"))
            self.assertIsNotNone(self.slots.take("2001:db8:1:2::/64"))
            self.assertIsNotNone(self.slots.take("2001:db8:1:2::/64"))
            self.assertIsNone(self.slots.take("2001:db8:1:3::/64"))  # the /48's four are taken
            self.assertIsNotNone(self.slots.take("2001:db8:2:1::/64"))
