"""May this person hold tokens now: one answer (``authserver.core.tokens.person_may_hold_tokens``),
asked at every door that issues a token for a person, under the person's lock, and at every use
(``token_check``). A person who may not is refused in words (``invalid_grant``; ``unauthorized_client``
for their headless agent) and nothing is stored. Deprovisioning and deactivation end the person's
headless agents too, so that reactivating them brings no agent back.

A person deactivated without the signal (a bulk ``QuerySet.update``, which revokes nothing) still
holds codes, refresh tokens and live agents: each door refuses them. The races are made to happen on
PostgreSQL with held row locks (``tests/test_token_races.py``'s pattern), never with sleeps.
"""

import io
import threading
import time
import unittest
import uuid
from collections.abc import Callable
from typing import Any

import httpx2
import jwt
from allauth.socialaccount.models import SocialAccount
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection, connections, transaction
from django.test import override_settings
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model

from authserver.clients import agents
from authserver.core import tokens
from authserver.enterprise import id_jag
from authserver.models import HeadlessAgent, SpentJti
from authserver.people import leaving
from mcp_endpoint.auth import token_checksum
from tests.base import authorization_code, on_postgres
from tests.hosted_clients import public_jwk, rsa_key
from tests.http_client import call_tool
from tests.live import LiveServerTestCase
from tests.loopback_http import DocumentsServer
from tests.oauth_helpers import exchange_code, refresh
from tests.oidc import sso_settings

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
IDP_KEY = rsa_key()


class PersonTestCase(LiveServerTestCase):
    """Alice, a public client of hers (as dynamic registration makes one), and a headless agent of
    hers with a secret."""

    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        Application = get_application_model()
        self.application = Application.objects.create(
            name="her client",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
        )
        self.base = self.live.base_url

    def make_agent(self) -> agents.CreatedAgent:
        return agents.agent_create(owner=self.alice, name="nightly", scopes=["notes:read"])

    def redeem(self, code: str, verifier: str) -> httpx2.Response:
        return exchange_code(self.base, self.application.client_id, code, verifier)

    def tokens(self) -> dict:
        answer = self.redeem(*authorization_code(self.alice, self.application))
        self.assertEqual(answer.status_code, 200, answer.text)
        return answer.json()

    def agent_token(self, agent: agents.CreatedAgent) -> httpx2.Response:
        return httpx2.post(
            self.base + "/o/token/",
            data={"grant_type": "client_credentials"},
            auth=(agent.client_id, agent.secret),
            timeout=120,
        )

    def deactivate_without_the_signal(self) -> None:
        # What an operator's bulk update does: no post_save, so nothing is revoked.
        get_user_model().objects.filter(pk=self.alice.pk).update(is_active=False)

    def held(self) -> tuple[int, int]:
        """(access tokens, live refresh tokens) Alice holds, for any application."""
        live = RefreshToken.objects.filter(user=self.alice, revoked__isnull=True)
        return AccessToken.objects.filter(user=self.alice).count(), live.count()

    def assertRefused(self, answer: httpx2.Response, error: str) -> None:
        self.assertEqual(answer.status_code, 400, answer.text)
        body = answer.json()
        self.assertEqual(body["error"], error, body)
        self.assertIn("deactivated", body.get("error_description", ""), body)


class DeactivatedPersonTest(PersonTestCase):
    def test_a_code_is_refused_once_its_person_is_deactivated_and_nothing_is_stored(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        self.deactivate_without_the_signal()
        self.assertRefused(self.redeem(code, verifier), "invalid_grant")
        self.assertEqual(self.held(), (0, 0))

    def test_a_refresh_is_refused_once_its_person_is_deactivated_and_the_pair_stays_as_it_was(self) -> None:
        issued = self.tokens()
        self.deactivate_without_the_signal()
        self.assertRefused(refresh(self.base, self.application.client_id, issued["refresh_token"]), "invalid_grant")
        # Not rotated: the one pair is still the one the code issued.
        self.assertEqual(self.held(), (1, 1))
        self.assertTrue(RefreshToken.objects.filter(token_checksum=token_checksum(issued["refresh_token"])).exists())

    def test_a_headless_agent_is_refused_once_its_owner_is_deactivated(self) -> None:
        agent = self.make_agent()
        self.deactivate_without_the_signal()
        self.assertRefused(self.agent_token(agent), "unauthorized_client")
        self.assertEqual(self.held(), (0, 0))

    def test_a_reactivated_person_is_issued_tokens_again(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        self.deactivate_without_the_signal()
        get_user_model().objects.filter(pk=self.alice.pk).update(is_active=True)
        self.assertEqual(self.redeem(code, verifier).status_code, 200)

    def test_mint_access_token_refuses_a_deactivated_person_and_stores_nothing(self) -> None:
        self.deactivate_without_the_signal()
        self.alice.refresh_from_db()
        with self.assertRaises(tokens.PersonShutOut):
            self.token_for(self.alice)
        self.assertEqual(self.held(), (0, 0))
        with self.assertRaisesMessage(CommandError, "inactive"):
            call_command("mint_token", "alice", stdout=io.StringIO(), stderr=io.StringIO())
        self.assertEqual(self.held(), (0, 0))

    def test_no_headless_agent_is_made_for_a_deactivated_person(self) -> None:
        self.deactivate_without_the_signal()
        with self.assertRaisesMessage(agents.AgentRefused, "deactivated"):
            self.make_agent()
        self.assertFalse(HeadlessAgent.objects.exists())


class AgentsEndWithTheirPersonTest(PersonTestCase):
    """Deprovisioning (SCIM, leaving) and deactivation (the admin's checkbox, ``user.save()``)
    revoke every live headless agent of the person, through ``agents.agent_revoke``: its secret or
    keys are gone, so reactivating the person brings no agent back, as it brings no token back."""

    def assertAgentEnded(self, agent: agents.CreatedAgent, by: str, logs: Any) -> None:
        row = HeadlessAgent.objects.select_related("application").get(pk=agent.agent.pk)
        self.assertIsNotNone(row.revoked)
        self.assertEqual(row.application.client_secret, "")
        self.assertIn((agent.client_id, by), [(r.client_id, r.by) for r in logs.records if r.event == "agent.revoked"])
        get_user_model().objects.filter(pk=self.alice.pk).update(is_active=True)
        answer = self.agent_token(agent)
        self.assertEqual((answer.status_code, answer.json()["error"]), (401, "invalid_client"), answer.text)
        self.assertEqual(AccessToken.objects.filter(application__client_id=agent.client_id).count(), 0)

    def test_deprovisioning_revokes_her_agents_and_the_tokens_they_hold(self) -> None:
        agent = self.make_agent()
        held = self.agent_token(agent)
        self.assertEqual(held.status_code, 200, held.text)
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            leaving.shut_out(user=self.alice, by="deprovisioning")
        self.assertEqual(
            call_tool(self.mcp_url, held.json()["access_token"], "field_notes_search", {}).status_code, 401
        )
        self.assertAgentEnded(agent, "deprovisioning", logs)

    def test_deactivation_by_saving_the_person_revokes_her_agents(self) -> None:
        agent = self.make_agent()
        self.alice.is_active = False
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            self.alice.save()
        self.assertAgentEnded(agent, "deactivation", logs)

    def test_someone_elses_agent_stays(self) -> None:
        bob = self.make_user("bob")
        bobs = agents.agent_create(owner=bob, name="bob's", scopes=["notes:read"])
        self.make_agent()
        leaving.shut_out(user=self.alice, by="deprovisioning")
        self.assertIsNone(HeadlessAgent.objects.get(pk=bobs.agent.pk).revoked)
        self.assertEqual(self.agent_token(bobs).status_code, 200)


class HeldLockTestCase(PersonTestCase):
    """Each issuance reads whether its person may hold tokens under the person's lock: the test
    holds that lock, waits until PostgreSQL shows the issuance waiting for it, shuts the person out
    in the transaction that holds it, and lets go. Without the lock the issuance never waits, and
    the test says so; without the read under it, a token is issued to the person shut out."""

    def wait_until_waiting(self, worker: threading.Thread, what: str) -> None:
        for _ in range(6000):  # bounded: a lock that is not taken fails the test instead of hanging it
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM pg_locks WHERE NOT granted")
                if cursor.fetchone()[0]:
                    return
            if not worker.is_alive():
                self.fail(f"{what} finished without waiting for the lock the test holds")
            time.sleep(0.01)
        self.fail(f"{what} did not reach the lock in 60 s")

    def in_thread(self, work: Callable[[], Any], outcomes: list) -> threading.Thread:
        def run() -> None:
            try:
                outcomes.append(work())
            except Exception as error:  # the outcome the test reads
                outcomes.append(error)
            finally:
                connections.close_all()

        return threading.Thread(target=run)

    def race(self, work: Callable[[], Any], what: str, shut_out: Callable[[], Any]) -> Any:
        outcomes: list = []
        worker = self.in_thread(work, outcomes)
        with transaction.atomic():
            # What every issuance for a person and every revocation of theirs take first: their row.
            get_user_model().objects.select_for_update().get(pk=self.alice.pk)
            worker.start()
            self.wait_until_waiting(worker, what)
            shut_out()
        worker.join(timeout=120)
        [outcome] = outcomes
        return outcome


@unittest.skipUnless(on_postgres(), "row locks: SQLite runs one write transaction at a time")
class HeldLockTest(HeldLockTestCase):
    def test_a_code_redeemed_as_its_person_is_deactivated_gets_invalid_grant_and_leaves_no_token(self) -> None:
        code, verifier = authorization_code(self.alice, self.application)
        answer = self.race(
            lambda: self.redeem(code, verifier), "the code's redemption", self.deactivate_without_the_signal
        )
        self.assertRefused(answer, "invalid_grant")
        self.assertEqual(self.held(), (0, 0))

    def test_an_agent_token_requested_as_its_owner_is_deprovisioned_is_refused_never_left(self) -> None:
        agent = self.make_agent()
        answer = self.race(
            lambda: self.agent_token(agent),
            "the agent's token request",
            lambda: leaving.shut_out(user=self.alice, by="deprovisioning"),
        )
        self.assertRefused(answer, "unauthorized_client")
        self.assertEqual(self.held(), (0, 0))
        self.assertIsNotNone(HeadlessAgent.objects.get(pk=agent.agent.pk).revoked)

    def test_an_agent_made_as_its_owner_is_deprovisioned_is_refused(self) -> None:
        outcome = self.race(
            self.make_agent, "the agent's creation", lambda: leaving.shut_out(user=self.alice, by="deprovisioning")
        )
        self.assertIsInstance(outcome, agents.AgentRefused)
        self.assertIn("deactivated", str(outcome))
        self.assertFalse(HeadlessAgent.objects.filter(revoked__isnull=True).exists())


@unittest.skipUnless(on_postgres(), "row locks: SQLite runs one write transaction at a time")
class IdJagHeldLockTest(HeldLockTestCase):
    """The ID-JAG grant finds its person before its transaction, and issues in it: the person
    deprovisioned in between gets no token, and the refusal stores nothing (not even the jti)."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())
        origin = cls.documents.origin
        cls.documents.documents = {
            "/.well-known/openid-configuration": {"issuer": origin, "jwks_uri": origin + "/jwks"},
            "/jwks": {"keys": [public_jwk(IDP_KEY, "idp-1", "RS256")]},
        }
        provider = {
            "id": "acme",
            "name": "Acme staff",
            "issuer": origin,
            "client_id": "codex-at-acme",
            "secret": "not-used-here",
            "domains": ["acme.test"],
            "id_jag": True,
        }
        cls.enterClassContext(override_settings(**sso_settings(provider), CODEX_CIMD_ALLOW_LOOPBACK=True))

    def setUp(self) -> None:
        super().setUp()
        SocialAccount.objects.create(user=self.alice, provider="acme", uid="alice-at-acme")
        Application = get_application_model()
        self.confidential = Application.objects.create(
            name="Acme agent",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
            client_secret="agent-secret",
        )

    def present(self) -> httpx2.Response:
        now = int(time.time())
        claims = {
            "iss": self.documents.origin,
            "sub": "alice-at-acme",
            "aud": settings.CODEX_ISSUER_URL,
            "resource": settings.CODEX_RESOURCE_URL,
            "client_id": self.confidential.client_id,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "exp": now + 300,
            "scope": "notes:read",
        }
        assertion = jwt.encode(claims, IDP_KEY, algorithm="RS256", headers={"kid": "idp-1", "typ": id_jag.TYP})
        return httpx2.post(
            self.base + "/o/token/",
            data={"grant_type": id_jag.GRANT_TYPE, "assertion": assertion, "resource": settings.CODEX_RESOURCE_URL},
            auth=(self.confidential.client_id, "agent-secret"),
            timeout=120,
        )

    def test_an_id_jag_presented_as_its_person_is_deprovisioned_is_refused_storing_nothing(self) -> None:
        first = self.present()  # the IdP's keys fetched and kept; the person found
        self.assertEqual(first.status_code, 200, first.text)
        spent = SpentJti.objects.count()
        answer = self.race(
            self.present, "the ID-JAG's grant", lambda: leaving.shut_out(user=self.alice, by="deprovisioning")
        )
        self.assertRefused(answer, "invalid_grant")
        self.assertEqual(self.held(), (0, 0))
        self.assertEqual(SpentJti.objects.count(), spent)
