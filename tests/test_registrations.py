"""Dynamic client registration as hosted clients use it, and a flood that leaves nothing lasting.

A hosted client (claude.ai, for one) registers a new client for every person who connects, from
the same few addresses; each registration is followed by that person's sign-in within minutes.
A flood of registrations that nobody approves is bounded by what it can leave behind: a few
waiting registrations per address, each removed after CODEX_DCR_PENDING_SECONDS."""

import datetime as dt
import io
import json
from types import SimpleNamespace
from typing import Any
from unittest import mock

import httpx2
from django.core.management import call_command
from django.test import Client, TestCase, override_settings
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, get_grant_model

import codex_site.settings as configured
from authserver.clients import registration
from authserver.models import PendingRegistration
from tests.clocks import one_rate_window
from tests.live import LiveServerTestCase
from tests.loopback_http import DocumentsServer
from tests.oauth_helpers import REDIRECT_URI, Browser, authorization_url, exchange_code, pkce_pair

Application = get_application_model()
# What claude.ai sends when it registers (its redirect URI is never contacted here).
HOSTED_CLIENT = {
    "client_name": "Claude",
    "redirect_uris": ["https://claude.ai/api/mcp/auth_callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
    "scope": "notes:read notes:write",
}
# This server's defaults, as an operator who changed nothing runs it.
DEFAULTS = {
    name: getattr(configured, name)
    for name in (
        "CODEX_DCR_RATE_LIMIT",
        "CODEX_DCR_PENDING_SECONDS",
        "CODEX_DCR_PENDING_PER_ADDRESS",
        "CODEX_DCR_PENDING_MAX",
    )
}


def registration_clock(at: dt.datetime):
    """The waiting registrations' clock (only theirs) standing at ``at``."""
    return mock.patch.object(registration, "timezone", SimpleNamespace(now=lambda: at))


@override_settings(**DEFAULTS)
class HostedClientTest(LiveServerTestCase):
    def test_thirty_people_connecting_through_one_address_in_a_row_all_succeed(self) -> None:
        with one_rate_window():
            for number in range(30):
                person = self.make_user(f"person-{number}")
                registered = httpx2.post(self.live.base_url + "/o/register/", json=HOSTED_CLIENT, timeout=30)
                self.assertEqual(registered.status_code, 201, registered.text)
                client_id = registered.json()["client_id"]
                browser = Browser(self.live.base_url, person.username, f"{person.username}-password")
                self.addCleanup(browser.close)
                verifier, challenge = pkce_pair()
                redirect_uri = HOSTED_CLIENT["redirect_uris"][0]
                url = authorization_url(
                    self.live.base_url,
                    client_id,
                    redirect_uri=redirect_uri,
                    scope=HOSTED_CLIENT["scope"],
                    code_challenge=challenge,
                    code_challenge_method="S256",
                )
                code = browser.authorize(url)["code"]
                token = exchange_code(self.live.base_url, client_id, code, verifier, redirect_uri=redirect_uri)
                self.assertEqual(token.status_code, 200, token.text)
        self.assertEqual(Application.objects.filter(registration_source="dcr").count(), 30)
        self.assertEqual(PendingRegistration.objects.count(), 0)  # each one is its person's now


@override_settings(**DEFAULTS)
class FloodTest(TestCase):
    def register(self, address: str = "203.0.113.7"):
        return Client().post(
            "/o/register/", json.dumps(HOSTED_CLIENT), content_type="application/json", REMOTE_ADDR=address
        )

    def test_a_thousand_junk_registrations_leave_nothing_lasting(self) -> None:
        per_address = DEFAULTS["CODEX_DCR_PENDING_PER_ADDRESS"]
        with one_rate_window():
            answers = [self.register() for _ in range(1_000)]
        statuses = [answer.status_code for answer in answers]
        self.assertEqual(statuses[:per_address], [201] * per_address)
        self.assertEqual(set(statuses[per_address:]), {429})  # past the rate limit too, later on
        refused = answers[per_address]
        self.assertEqual(refused.json()["error"], "too_many_requests")
        self.assertIn("waiting for a person to approve them", refused.json()["error_description"])
        self.assertLessEqual(int(refused["Retry-After"]), DEFAULTS["CODEX_DCR_PENDING_SECONDS"])
        self.assertEqual(Application.objects.count(), per_address)
        # Once they have waited out their time, the next registration (or the command) removes them.
        later = timezone.now() + dt.timedelta(seconds=DEFAULTS["CODEX_DCR_PENDING_SECONDS"] + 1)
        with registration_clock(later):
            output = io.StringIO()
            call_command("codex_expire_registrations", stdout=output)
        self.assertIn(f"removed {per_address} client registration(s)", output.getvalue())
        self.assertEqual(Application.objects.count(), 0)
        self.assertEqual(get_access_token_model().objects.count(), 0)  # their registration tokens too
        self.assertEqual(PendingRegistration.objects.count(), 0)

    def test_another_address_is_not_held_up_by_a_flooding_one(self) -> None:
        with override_settings(CODEX_DCR_PENDING_PER_ADDRESS=3), one_rate_window():
            self.assertEqual([self.register().status_code for _ in range(4)], [201, 201, 201, 429])
            self.assertEqual(self.register("198.51.100.9").status_code, 201)

    def test_past_the_servers_cap_the_oldest_waiting_registrations_make_room(self) -> None:
        with override_settings(CODEX_DCR_PENDING_PER_ADDRESS=3, CODEX_DCR_PENDING_MAX=5), one_rate_window():
            first = [self.register("203.0.113.1") for _ in range(3)]
            second = [self.register("203.0.113.2") for _ in range(3)]
            third = self.register("203.0.113.3")
        self.assertEqual([answer.status_code for answer in [*first, *second, third]], [201] * 7)
        # The server holds its cap, and what went is the oldest: the first network's first two.
        waiting = set(Application.objects.values_list("client_id", flat=True))
        self.assertEqual(len(waiting), 5)
        self.assertEqual(waiting, {answer.json()["client_id"] for answer in [first[2], *second, third]})
        self.assertEqual(PendingRegistration.objects.count(), 5)

    def test_expired_registrations_go_a_batch_at_a_time_with_each_registration(self) -> None:
        with one_rate_window():
            for _ in range(3):
                self.register()
            later = timezone.now() + dt.timedelta(seconds=DEFAULTS["CODEX_DCR_PENDING_SECONDS"] + 1)
            with registration_clock(later):
                self.assertEqual(self.register().status_code, 201)
        self.assertEqual(Application.objects.count(), 1)  # the three are gone, the new one waits


@override_settings(**DEFAULTS)
class ApprovalTest(LiveServerTestCase):
    """A registration a person approved is never expired; one approved too late is refused."""

    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)

    def registered(self) -> str:
        answer = httpx2.post(self.live.base_url + "/o/register/", json=HOSTED_CLIENT, timeout=30)
        self.assertEqual(answer.status_code, 201, answer.text)
        return answer.json()["client_id"]

    def consent(self, client_id: str):
        _verifier, challenge = pkce_pair()
        url = authorization_url(
            self.live.base_url,
            client_id,
            redirect_uri=HOSTED_CLIENT["redirect_uris"][0],
            code_challenge=challenge,
            code_challenge_method="S256",
        )
        return self.browser.decide(self.browser.open_authorization(url), allow=True)

    def test_an_approved_registration_outlives_the_wait(self) -> None:
        client_id = self.registered()
        self.assertEqual(self.consent(client_id).status_code, 302)
        later = timezone.now() + dt.timedelta(seconds=DEFAULTS["CODEX_DCR_PENDING_SECONDS"] * 10)
        with registration_clock(later):
            self.assertEqual(registration.expire_pending(), 0)
        self.assertTrue(Application.objects.filter(client_id=client_id).exists())

    def test_an_approval_after_the_wait_is_refused_and_saves_no_grant(self) -> None:
        client_id = self.registered()
        page = self.browser.open_authorization(
            authorization_url(
                self.live.base_url,
                client_id,
                redirect_uri=HOSTED_CLIENT["redirect_uris"][0],
                code_challenge=pkce_pair()[1],
                code_challenge_method="S256",
            )
        )
        later = timezone.now() + dt.timedelta(seconds=DEFAULTS["CODEX_DCR_PENDING_SECONDS"] + 1)
        with registration_clock(later):
            answer = self.browser.decide(page, allow=True)
        self.assertEqual(answer.status_code, 400, answer.text)
        self.assertIn("registration expired before anyone approved it", answer.text)
        self.assertEqual(get_grant_model().objects.count(), 0)


@override_settings(CODEX_DCR_RATE_LIMIT=1_000_000, CODEX_CIMD_RATE_LIMIT=1_000_000)
class GrantTypesTest(TestCase):
    """RFC 7591 §3.2.1: a registration asking for grants this server does not serve besides the
    authorization code is registered with those it serves, and its answer says so; one asking for
    no authorization code is refused, at every door that registers a client."""

    def register(self, grant_types) -> Any:
        body = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none", "grant_types": grant_types}
        return Client().post("/o/register/", json.dumps(body), content_type="application/json")

    def test_grants_not_served_beside_the_authorization_code_are_dropped_and_the_answer_says_so(self) -> None:
        for asked in [
            ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
            ["urn:ietf:params:oauth:grant-type:device_code", "authorization_code"],
            ["authorization_code", "implicit", "client_credentials", "authorization_code"],
        ]:
            with self.subTest(asked=asked):
                answer = self.register(asked)
                self.assertEqual(answer.status_code, 201, answer.content)
                self.assertEqual(answer.json()["grant_types"], ["authorization_code", "refresh_token"])
                application = Application.objects.get(client_id=answer.json()["client_id"])
                self.assertEqual(application.authorization_grant_type, Application.GRANT_AUTHORIZATION_CODE)
                registered = answer.json()
                path = f"/o/register/{registered['client_id']}/"
                update = {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none", "grant_types": asked}
                updated = Client().put(
                    path,
                    json.dumps(update),
                    content_type="application/json",
                    HTTP_AUTHORIZATION=f"Bearer {registered['registration_access_token']}",
                )
                self.assertEqual(updated.status_code, 200, updated.content)
                self.assertEqual(updated.json()["grant_types"], ["authorization_code", "refresh_token"])

    def test_a_registration_with_no_authorization_code_is_refused_in_words(self) -> None:
        for asked in [["client_credentials"], ["refresh_token"], [], "authorization_code", [17]]:
            with self.subTest(asked=asked):
                answer = self.register(asked)
                self.assertEqual(answer.status_code, 400, answer.content)
                self.assertEqual(answer.json()["error"], "invalid_client_metadata")
                self.assertIn('"grant_types" must', answer.json()["error_description"])
        self.assertEqual(Application.objects.count(), 0)

    def test_a_metadata_document_with_no_authorization_code_gets_the_refused_client_page(self) -> None:
        documents = self.enterContext(DocumentsServer())
        client_id = documents.origin + "/client.json"
        documents.documents["/client.json"] = {
            "client_id": client_id,
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["client_credentials"],
        }
        _, challenge = pkce_pair()
        page = Client().get(authorization_url("", client_id, code_challenge=challenge, code_challenge_method="S256"))
        self.assertEqual(page.status_code, 400)
        self.assertIn("must include &quot;authorization_code&quot;", page.content.decode())
        self.assertEqual(Application.objects.count(), 0)
