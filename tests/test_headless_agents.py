"""Headless agents by the book (the MCP OAuth Client Credentials extension): a person makes one
on their account page, and the SDK's client-credentials clients (a secret, and
``private_key_jwt`` with a key made here) get tokens with ``grant_type=client_credentials`` at the
real server, list the tools and call all four, for that person's codex. Revoking the agent on
Connected applications makes its next call 401 and its credentials useless. Every other use of
the grant is refused, as is every other grant for the agent."""

import asyncio
import datetime as dt
import json
import logging
import re
import threading
import time
import unittest
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import check_password
from django.contrib.auth.models import Permission
from django.db import connection, transaction
from django.test import Client as DjangoClient
from django.test import TestCase, override_settings
from django.utils import timezone
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model

from authserver.clients import agents
from authserver.models import ClientKeys, HeadlessAgent
from authserver.people import leaving
from mcp_endpoint.auth import token_checksum
from tests.base import on_postgres
from tests.http_client import call_tool
from tests.live import LiveServerTestCase
from tests.mcp_client import all_four_tools, with_client
from tests.oauth_helpers import Browser, forms_of
from tests.sdk_oauth import MemoryStorage
from tests.test_frame import CONTRACT_WORDS, visible_words

NEW_AGENT = "/account/clients/agents/new/"
TOOLS = {"field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"}
CRON_JOB = all_four_tools("from a cron job", "cron")


def rsa_key_pair() -> tuple[str, str]:
    """(private PEM, public PEM) of a new RSA key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return private, public


class AgentPage:
    """The person on the new-agent page, through the real HTML forms: signed in, then asked for
    their password again (allauth's reauthentication, as for the account's other sensitive
    actions) the first time."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser

    def open(self) -> httpx2.Response:
        page = self.browser.open_authorization(self.browser.base_url + NEW_AGENT)
        if page.status_code == 302 and "/accounts/reauthenticate/" in page.headers["location"]:
            asked = self.browser.http.get(self.browser.base_url + page.headers["location"])
            form = next(f for f in forms_of(asked.text) if "password" in f["fields"])
            again = self.browser.http.post(str(asked.url), data={**form["fields"], "password": self.browser.password})
            assert again.status_code == 302, again.text[:2000]
            page = self.browser.http.get(self.browser.base_url + NEW_AGENT)
        return page

    def make(self, name: str, scopes: list[str], *, public_key: str | None = None) -> httpx2.Response:
        page = self.open()
        assert page.status_code == 200, (page.status_code, page.headers.get("location"), page.text[:2000])
        form = next(f for f in forms_of(page.text) if (f["action"] or "").endswith(NEW_AGENT))
        data = {
            "csrfmiddlewaretoken": form["fields"]["csrfmiddlewaretoken"],
            "name": name,
            "scopes": scopes,
            "authentication": "private_key_jwt" if public_key is not None else "client_secret",
            "public_key": public_key or "",
        }
        return self.browser.http.post(self.browser.base_url + NEW_AGENT, data=data)


def shown(page: httpx2.Response, element_id: str) -> str | None:
    match = re.search(rf'id="{element_id}">([^<]+)<', page.text)
    return match.group(1) if match else None


class HeadlessAgentFlowTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)
        self.page = AgentPage(self.browser)
        self.issuer = self.live.base_url + "/o"
        self.token_url = self.issuer + "/token/"

    def make_secret_agent(self, scopes: list[str] | None = None) -> tuple[str, str, httpx2.Response]:
        made = self.page.make("nightly digest", scopes or ["notes:read", "notes:write"])
        self.assertEqual(made.status_code, 200, made.text[:2000])
        client_id, secret = shown(made, "agent_client_id"), shown(made, "agent_secret")
        self.assertTrue(client_id and secret, made.text[:2000])
        return client_id, secret, made

    def revoke_on_the_page(self, client_id: str) -> None:
        application = get_application_model().objects.get(client_id=client_id)
        url = f"{self.live.base_url}/account/clients/{application.pk}/revoke/"
        asked = self.browser.http.get(url)
        self.assertEqual(asked.status_code, 200, asked.text[:2000])
        self.assertIn("stops working for good", asked.text)
        form = next(f for f in forms_of(asked.text) if (f["action"] or "").endswith("/revoke/"))
        done = self.browser.http.post(url, data=form["fields"])
        self.assertEqual(done.status_code, 302, done.text[:2000])

    def token_request(self, **data: str) -> httpx2.Response:
        return httpx2.post(self.token_url, data={"grant_type": "client_credentials", **data})

    def test_an_agent_with_a_secret_calls_all_four_tools_through_the_sdk_and_stops_when_revoked(self) -> None:
        with self.assertLogs("codex.access.audit", logging.INFO) as logs:
            client_id, secret, made = self.make_secret_agent()
        self.assertIn("only time it is shown", made.text)
        self.assertIn("no-store", made.headers["cache-control"])
        [created] = [record for record in logs.records if record.event == "agent.created"]
        self.assertEqual((created.user_id, created.client_id), (self.alice.pk, client_id))
        self.assertEqual((created.authentication, created.scopes), ("client_secret", ["notes:read", "notes:write"]))

        # Stored hashed (DOT's hash_client_secret), and shown nowhere again.
        application = get_application_model().objects.get(client_id=client_id)
        self.assertNotEqual(application.client_secret, secret)
        self.assertTrue(check_password(secret, application.client_secret))
        self.assertEqual(
            (application.client_type, application.authorization_grant_type, application.user),
            ("confidential", "client-credentials", self.alice),
        )
        again = self.page.open()
        self.assertEqual(again.status_code, 200)
        self.assertNotIn(secret, again.text)
        self.assertIsNone(shown(again, "agent_secret"))
        listed = self.browser.http.get(self.live.base_url + "/account/clients/")
        self.assertIn("nightly digest", listed.text)
        self.assertIn("(headless agent)", listed.text)  # listed before it ever got a token
        self.assertNotIn(secret, listed.text)

        storage = MemoryStorage()
        provider = ClientCredentialsOAuthProvider(
            server_url=self.mcp_url, storage=storage, client_id=client_id, client_secret=secret, issuer=self.issuer
        )
        with self.assertLogs("codex.access.audit", logging.INFO) as logs:
            answered = with_client(self.mcp_url, None, "auto", CRON_JOB, auth=provider)
        self.assertEqual(set(answered["tools"]), TOOLS)
        self.assertEqual(answered["got"]["entry"]["content"], "from a cron job")
        self.assertEqual([e["id"] for e in answered["found"]["entries"]], [answered["saved"]["entry"]["id"]])
        self.assertEqual(answered["updated"]["entry"]["revision"], 2)
        [granted] = [record for record in logs.records if record.event == "token.granted"]
        self.assertEqual((granted.client_id, granted.grant_type), (client_id, "client_credentials"))
        self.assertNotIn(secret, "\n".join(logs.output))

        # The token acts for Alice's codex, bound to /mcp, with no refresh token.
        self.assertIsNone(storage.tokens.refresh_token)
        token = get_access_token_model().objects.get(token_checksum=token_checksum(storage.tokens.access_token))
        self.assertEqual((token.user, token.application, token.resource), (self.alice, application, [self.mcp_url]))
        self.assertEqual(set(token.scope.split()), {"notes:read", "notes:write"})
        self.assertFalse(get_refresh_token_model().objects.filter(application=application).exists())
        self.assertEqual(self.alice.codex.entries.count(), 1)  # her codex, written by the agent

        # Revoked on Connected applications: the next call is 401, and no new token.
        access_token = storage.tokens.access_token
        self.assertEqual(call_tool(self.mcp_url, access_token, "field_notes_search", {}).status_code, 200)
        with self.assertLogs("codex.access.audit", logging.INFO) as logs:
            self.revoke_on_the_page(client_id)
        self.assertEqual(
            [record.event for record in logs.records if record.event.startswith("agent.")], ["agent.revoked"]
        )
        self.assertEqual(call_tool(self.mcp_url, access_token, "field_notes_search", {}).status_code, 401)
        refused = self.token_request(client_id=client_id, client_secret=secret)
        self.assertEqual((refused.status_code, refused.json()["error"]), (401, "invalid_client"), refused.text)
        refused = httpx2.post(self.token_url, data={"grant_type": "client_credentials"}, auth=(client_id, secret))
        self.assertEqual((refused.status_code, refused.json()["error"]), (401, "invalid_client"), refused.text)
        self.assertIsNotNone(HeadlessAgent.objects.get(application__client_id=client_id).revoked)
        self.assertNotIn("nightly digest", self.browser.http.get(self.live.base_url + "/account/clients/").text)

    def test_an_agent_with_its_public_key_signs_in_with_private_key_jwt_through_the_sdk(self) -> None:
        private_pem, public_pem = rsa_key_pair()
        made = self.page.make("key agent", ["notes:read", "notes:write"], public_key=public_pem)
        self.assertEqual(made.status_code, 200, made.text[:2000])
        client_id = shown(made, "agent_client_id")
        self.assertIsNone(shown(made, "agent_secret"))  # no secret: it has its key
        self.assertEqual(ClientKeys.objects.get(client_id=client_id).jwks["keys"][0]["kty"], "RSA")
        self.assertEqual(get_application_model().objects.get(client_id=client_id).client_secret, "")

        signer = SignedJWTParameters(issuer=client_id, subject=client_id, signing_key=private_pem)
        storage = MemoryStorage()
        provider = PrivateKeyJWTOAuthProvider(
            server_url=self.mcp_url,
            storage=storage,
            client_id=client_id,
            assertion_provider=signer.create_assertion_provider(),
            issuer=self.issuer,
        )
        answered = with_client(self.mcp_url, None, "auto", CRON_JOB, auth=provider)
        self.assertEqual(set(answered["tools"]), TOOLS)
        self.assertEqual(answered["updated"]["entry"]["revision"], 2)
        token = get_access_token_model().objects.get(token_checksum=token_checksum(storage.tokens.access_token))
        self.assertEqual((token.user, token.resource), (self.alice, [self.mcp_url]))
        self.assertIsNone(storage.tokens.refresh_token)

        # Without an assertion (or with an empty secret) it is not this agent.
        for data in ({"client_id": client_id}, {"client_id": client_id, "client_secret": ""}):
            with self.assertLogs("authserver.clients.authentication", logging.WARNING):
                refused = self.token_request(**data)
            self.assertEqual((refused.status_code, refused.json()["error"]), (401, "invalid_client"), refused.text)

        self.revoke_on_the_page(client_id)
        self.assertEqual(
            call_tool(self.mcp_url, storage.tokens.access_token, "field_notes_search", {}).status_code, 401
        )
        self.assertFalse(ClientKeys.objects.filter(client_id=client_id).exists())
        assertion = asyncio.run(signer.create_assertion_provider()(self.issuer))
        with self.assertLogs("authserver.clients.authentication", logging.WARNING) as refusal:
            refused = self.token_request(
                client_assertion_type="urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
                client_assertion=assertion,
            )
        self.assertIn("revoked", refusal.output[0])
        self.assertEqual((refused.status_code, refused.json()["error"]), (401, "invalid_client"), refused.text)

    def test_an_elliptic_curve_jwks_works_too(self) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        public_jwk = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
        made = self.page.make("ec agent", ["notes:read"], public_key=json.dumps({"keys": [public_jwk]}))
        client_id = shown(made, "agent_client_id")
        self.assertTrue(client_id, made.text[:2000])
        private_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode()
        assertion = asyncio.run(
            SignedJWTParameters(
                issuer=client_id, subject=client_id, signing_key=private_pem, signing_algorithm="ES256"
            ).create_assertion_provider()(self.issuer)
        )
        answer = self.token_request(
            client_assertion_type="urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            client_assertion=assertion,
            resource=self.mcp_url,
        )
        self.assertEqual(answer.status_code, 200, answer.text)
        self.assertEqual(answer.json()["scope"], "notes:read")  # no scope asked: all of the agent's
        self.assertNotIn("refresh_token", answer.json())

    def test_every_other_use_is_refused(self) -> None:
        client_id, secret, _ = self.make_secret_agent(scopes=["notes:read"])
        tokens_before = get_access_token_model().objects.count()

        # Another grant type for the agent's client.
        for data in (
            {"grant_type": "authorization_code", "code": "x" * 30, "redirect_uri": "http://127.0.0.1:9/callback"},
            {"grant_type": "refresh_token", "refresh_token": "x" * 30},
        ):
            with self.subTest(grant_type=data["grant_type"]):
                answer = httpx2.post(self.token_url, data=data, auth=(client_id, secret))
                self.assertEqual(
                    (answer.status_code, answer.json()["error"]), (400, "unauthorized_client"), answer.text
                )
        # Nor may it start an authorization (it has no redirect URI, and the grant is not its).
        answer = httpx2.get(
            self.issuer + "/authorize/",
            params={"response_type": "code", "client_id": client_id, "code_challenge": "x" * 43},
        )
        self.assertEqual(answer.status_code, 400, answer.text[:500])

        # client_credentials for an ordinary confidential client.
        Application = get_application_model()
        ordinary = Application.objects.create(
            name="ordinary",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret="o" * 40,
            user=self.alice,
        )
        answer = httpx2.post(
            self.token_url, data={"grant_type": "client_credentials"}, auth=(ordinary.client_id, "o" * 40)
        )
        self.assertEqual((answer.status_code, answer.json()["error"]), (400, "unauthorized_client"), answer.text)

        # A wrong secret.
        answer = self.token_request(client_id=client_id, client_secret=secret + "x")
        self.assertEqual((answer.status_code, answer.json()["error"]), (401, "invalid_client"), answer.text)

        # Scopes beyond the agent's.
        answer = self.token_request(client_id=client_id, client_secret=secret, scope="notes:read notes:write")
        self.assertEqual((answer.status_code, answer.json()["error"]), (400, "invalid_scope"), answer.text)
        self.assertIn("notes:read", answer.json()["error_description"])
        # Another resource.
        answer = self.token_request(client_id=client_id, client_secret=secret, resource="https://elsewhere.example/mcp")
        self.assertEqual((answer.status_code, answer.json()["error"]), (400, "invalid_target"), answer.text)
        self.assertEqual(get_access_token_model().objects.count(), tokens_before)

        # What it may ask for, it gets: read only, and a save is refused for want of the scope.
        answer = self.token_request(client_id=client_id, client_secret=secret, scope="notes:read")
        self.assertEqual(answer.status_code, 200, answer.text)
        self.assertEqual(answer.json()["scope"], "notes:read")
        token = answer.json()["access_token"]
        self.assertEqual(call_tool(self.mcp_url, token, "field_notes_search", {}).status_code, 200)
        saved = call_tool(self.mcp_url, token, "field_notes_save", {"requestId": "r", "entry": {"content": "x"}})
        self.assertEqual(saved.status_code, 403, saved.text)

    @override_settings(CODEX_AGENTS_PER_PERSON=1)
    def test_the_cap_refuses_one_more_with_a_clear_message(self) -> None:
        self.make_secret_agent()
        refused = self.page.make("one too many", ["notes:read"])
        self.assertEqual(refused.status_code, 400)
        self.assertIn("as many as this server allows", refused.text)
        self.assertIsNone(shown(refused, "agent_secret"))
        self.assertEqual(HeadlessAgent.objects.filter(owner=self.alice).count(), 1)
        self.assertEqual(get_application_model().objects.filter(user=self.alice).count(), 1)


class NewAgentPageTest(TestCase):
    """The page itself: re-authentication first, and what it refuses, on the test client."""

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.client = DjangoClient()

    def signed_in_just_now(self) -> None:
        self.assertTrue(self.client.login(username="alice", password="alice-password"))
        # allauth's reauthentication reads when the session last authenticated; the test client's
        # login records nothing, so the page asks for the password once, as it would a person.
        page = self.client.get(NEW_AGENT)
        if page.status_code == 302:
            again = self.client.post(page["Location"], {"password": "alice-password"})
            self.assertEqual(again.status_code, 302, again.content[:500])

    def test_the_page_asks_to_sign_in_again_first(self) -> None:
        self.client.force_login(self.alice)
        page = self.client.get(NEW_AGENT)
        self.assertEqual(page.status_code, 302)
        self.assertIn("/accounts/reauthenticate/", page["Location"])
        posted = self.client.post(NEW_AGENT, {"name": "x", "scopes": ["notes:read"], "authentication": "client_secret"})
        self.assertEqual(posted.status_code, 302)
        self.assertIn("/accounts/reauthenticate/", posted["Location"])
        self.assertFalse(HeadlessAgent.objects.exists())

    def test_it_refuses_bad_input_with_a_clear_error_and_writes_nothing(self) -> None:
        self.signed_in_just_now()
        private_pem, _ = rsa_key_pair()
        cases = {
            "no name": ({"name": " ", "scopes": ["notes:read"], "authentication": "client_secret"}, "This field"),
            "no scope": ({"name": "a", "authentication": "client_secret"}, "Choose what the agent may do"),
            "an unknown scope": (
                {"name": "a", "scopes": ["admin"], "authentication": "client_secret"},
                "Choose what the agent may do",
            ),
            "no key": ({"name": "a", "scopes": ["notes:read"], "authentication": "private_key_jwt"}, "Paste the"),
            "a private key": (
                {"name": "a", "scopes": ["notes:read"], "authentication": "private_key_jwt", "public_key": private_pem},
                "That is a private key",
            ),
            "not a key": (
                {"name": "a", "scopes": ["notes:read"], "authentication": "private_key_jwt", "public_key": "hello"},
                "neither a JSON Web Key Set nor a PEM public key",
            ),
            "a symmetric key": (
                {
                    "name": "a",
                    "scopes": ["notes:read"],
                    "authentication": "private_key_jwt",
                    "public_key": json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}),
                },
                "private or symmetric key",
            ),
            "an Ed25519 key": (
                {
                    "name": "a",
                    "scopes": ["notes:read"],
                    "authentication": "private_key_jwt",
                    "public_key": json.dumps(
                        {"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
                    ),
                },
                "use an RSA or an elliptic-curve key",
            ),
            "a short RSA key": (
                {
                    "name": "a",
                    "scopes": ["notes:read"],
                    "authentication": "private_key_jwt",
                    "public_key": rsa.generate_private_key(public_exponent=65537, key_size=1024)
                    .public_key()
                    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
                    .decode(),
                },
                "use at least 2048",
            ),
            "a control character": (
                {"name": "a\x07b", "scopes": ["notes:read"], "authentication": "client_secret"},
                "control character",
            ),
        }
        for case, (data, said) in cases.items():
            with self.subTest(case):
                page = self.client.post(NEW_AGENT, data)
                self.assertEqual(page.status_code, 400)
                self.assertContains(page, said, status_code=400)
        self.assertFalse(HeadlessAgent.objects.exists())
        self.assertFalse(get_application_model().objects.exists())
        self.assertFalse(ClientKeys.objects.exists())

    def test_the_secret_is_on_the_answer_to_the_post_only(self) -> None:
        self.signed_in_just_now()
        with self.captureOnCommitCallbacks(execute=True):
            made = self.client.post(
                NEW_AGENT, {"name": "job", "scopes": ["notes:read"], "authentication": "client_secret"}
            )
        self.assertEqual(made.status_code, 200)
        agent = HeadlessAgent.objects.get()
        secret = re.search(r'id="agent_secret">([^<]+)<', made.content.decode()).group(1)
        for path in (NEW_AGENT, "/account/clients/", f"/account/clients/{agent.application_id}/revoke/"):
            with self.subTest(path=path):
                page = self.client.get(path)
                self.assertEqual(page.status_code, 200)
                self.assertNotContains(page, secret)
        self.assertNotIn(secret, json.dumps(list(get_application_model().objects.values()), default=str))
        # In the site's words (notebook and note), as every page of the person's is.
        refused = self.client.post(NEW_AGENT, {"name": "x", "authentication": "client_secret"})
        for page in (made, refused, self.client.get(NEW_AGENT), self.client.get("/account/")):
            self.assertEqual(CONTRACT_WORDS.findall(visible_words(page.content.decode())), [])

    def test_someone_else_cannot_revoke_her_agent(self) -> None:
        created = agents.agent_create(owner=self.alice, name="job", scopes=["notes:read"])
        bob = get_user_model().objects.create_user("bob", password="bob-password")
        self.client.force_login(bob)
        self.assertEqual(self.client.get(f"/account/clients/{created.agent.application_id}/revoke/").status_code, 404)
        self.client.post(f"/account/clients/{created.agent.application_id}/revoke/")
        self.assertIsNone(HeadlessAgent.objects.get().revoked)

    def test_leaving_takes_her_agents_with_her(self) -> None:
        _, public_pem = rsa_key_pair()
        with self.captureOnCommitCallbacks(execute=True):
            created = agents.agent_create(owner=self.alice, name="job", scopes=["notes:read"], public_key=public_pem)
        leaving.account_delete(user=self.alice, by="person")
        self.assertFalse(HeadlessAgent.objects.exists())
        self.assertFalse(get_application_model().objects.filter(client_id=created.client_id).exists())
        self.assertFalse(ClientKeys.objects.exists())


@unittest.skipUnless(on_postgres(), "row locks: SQLite serialises every write, so no two of these can interleave")
class AgentLocksTest(LiveServerTestCase):
    """The two races the agents' locks close, each made to happen: the test holds the lock the
    other side takes, waits until PostgreSQL shows that side waiting for it (never a sleep), does
    its own part, and lets go. Without the lock the other side never waits, and the test says so."""

    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.token_url = self.live.base_url + "/o/token/"

    def wait_until_someone_waits_for_a_lock(self, worker: threading.Thread, what: str) -> None:
        # pg_locks is read afresh by each statement (pg_stat_activity would be a snapshot held
        # for the transaction). Bounded so that a broken lock fails instead of hanging the run.
        for _ in range(6000):
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    return
            if not worker.is_alive():
                self.fail(f"{what} finished without waiting for the lock the test holds")
            time.sleep(0.01)
        self.fail(f"{what} did not reach the lock in 60 s")

    def test_a_token_issued_as_its_agent_is_revoked_is_refused_never_left_behind(self) -> None:
        made = agents.agent_create(owner=self.alice, name="nightly", scopes=["notes:read"])
        answers: list[httpx2.Response] = []
        request = threading.Thread(
            target=lambda: answers.append(
                httpx2.post(
                    self.token_url,
                    data={"grant_type": "client_credentials"},
                    auth=(made.client_id, made.secret),
                    timeout=120,
                )
            )
        )
        with transaction.atomic():
            # What agent_revoke takes first, and the token request too: the owner's row (then the
            # agent's, which agent_revoke takes here while the request waits for the owner's).
            get_user_model().objects.select_for_update().get(pk=self.alice.pk)
            request.start()
            self.wait_until_someone_waits_for_a_lock(request, "the token request")
            self.assertTrue(agents.agent_revoke(agent=made.agent))
        request.join(timeout=120)
        [answer] = answers
        self.assertEqual(answer.status_code, 401, answer.text)
        self.assertEqual(answer.json()["error"], "invalid_client")
        self.assertFalse(get_access_token_model().objects.filter(application__client_id=made.client_id).exists())

    @override_settings(CODEX_AGENTS_PER_PERSON=2)
    def test_two_agents_made_at_once_never_pass_the_cap(self) -> None:
        agents.agent_create(owner=self.alice, name="first", scopes=["notes:read"])
        outcomes: list[str] = []

        def make_another() -> None:
            try:
                agents.agent_create(owner=self.alice, name="racing", scopes=["notes:read"])
                outcomes.append("made")
            except agents.AgentRefused as refused:
                outcomes.append(str(refused))
            finally:
                connection.close()  # this thread's own connection

        other = threading.Thread(target=make_another)
        with transaction.atomic():
            # What agent_create takes before it counts: the person's row.
            get_user_model().objects.select_for_update().get(pk=self.alice.pk)
            other.start()
            self.wait_until_someone_waits_for_a_lock(other, "the other creation")
            agents.agent_create(owner=self.alice, name="second", scopes=["notes:read"])
        other.join(timeout=120)
        [outcome] = outcomes
        self.assertIn("as many as this server allows", outcome)
        self.assertEqual(HeadlessAgent.objects.filter(owner=self.alice).count(), 2)


class OperatorAgentsAdminTest(TestCase):
    """The operator sees every person's agents in the admin and can revoke one (a leaked secret
    must not wait for its owner); the rows themselves are read-only there."""

    LIST = "/admin/authserver/headlessagent/"

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.made = agents.agent_create(owner=self.alice, name="nightly digest", scopes=["notes:read"])
        self.token = get_access_token_model().objects.create(
            user=self.alice,
            application=self.made.agent.application,
            token="agent-token",
            expires=timezone.now() + dt.timedelta(hours=1),
            scope="notes:read",
        )

    def revoke_action(self) -> dict[str, Any]:
        return {"action": "revoke_agents", "_selected_action": [self.made.agent.pk]}

    def test_the_operator_lists_every_agent_and_revokes_one_with_its_tokens(self) -> None:
        operator = get_user_model().objects.create_superuser("operator", password="x")
        self.client.force_login(operator)
        page = self.client.get(self.LIST)
        self.assertEqual(page.status_code, 200)
        self.assertContains(page, "nightly digest")
        self.assertContains(page, self.made.client_id)
        with self.assertLogs("codex.access.audit", "INFO") as captured, self.captureOnCommitCallbacks(execute=True):
            done = self.client.post(self.LIST, self.revoke_action(), follow=True)
        self.assertEqual(done.status_code, 200)
        self.assertContains(done, "Revoked 1 agent.")
        again = self.client.post(self.LIST, self.revoke_action(), follow=True)
        self.assertContains(again, "Revoked 0 agents. 1 was revoked already.")
        self.made.agent.refresh_from_db()
        self.assertIsNotNone(self.made.agent.revoked)
        self.assertFalse(get_access_token_model().objects.filter(pk=self.token.pk).exists())
        revoked = [r for r in captured.records if getattr(r, "event", None) == "agent.revoked"]
        self.assertEqual([(r.client_id, r.by) for r in revoked], [(self.made.client_id, "operator")])
        self.assertEqual(self.client.get(f"{self.LIST}{self.made.agent.pk}/change/").status_code, 200)
        self.assertEqual(self.client.get(f"{self.LIST}add/").status_code, 403)

    def test_staff_who_may_only_look_cannot_revoke(self) -> None:
        staff = get_user_model().objects.create_user("staff", password="x", is_staff=True)
        staff.user_permissions.add(Permission.objects.get(codename="view_headlessagent"))
        self.client.force_login(staff)
        self.assertContains(self.client.get(self.LIST), "nightly digest")
        self.client.post(self.LIST, self.revoke_action())
        self.made.agent.refresh_from_db()
        self.assertIsNone(self.made.agent.revoked)
        self.assertTrue(get_access_token_model().objects.filter(pk=self.token.pk).exists())
