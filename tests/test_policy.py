"""The operator's policy (authserver.core.policy, issue 43 item 4): each rule refuses what it names,
through the real endpoints, with words a person can act on and one audit line; and what the
policy permits still passes."""

import datetime as dt
import io
import json
import os
import subprocess
import sys
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client, TestCase, override_settings
from oauth2_provider.models import get_access_token_model

from authserver.core import policy
from codex_site.checks import RefusedToStart, configuration_problem
from codex_site.settings import oauth2_provider_settings
from tests.live import LiveServerTestCase
from tests.oauth_helpers import (
    REDIRECT_URI,
    Browser,
    authorization_url,
    exchange_code,
    pkce_pair,
    query_of,
    refresh,
    register_client,
)
from tests.sdk_oauth import LoopbackMetadataServer

AUDIT = "codex.access.audit"
ROOT = Path(__file__).resolve().parent.parent


def audit_lines(captured, event: str = "policy.refused") -> list:
    return [record for record in captured.records if getattr(record, "event", None) == event]


class MetadataDocumentHostsTest(LiveServerTestCase):
    """CODEX_CIMD_ALLOWED_HOSTS: a metadata document from another host gets the refused-client page
    naming the policy, and its document is never fetched."""

    def setUp(self) -> None:
        self.make_user("alice")
        self.base = self.live.base_url
        self.browser = Browser(self.base, "alice", "alice-password")
        self.addCleanup(self.browser.close)
        self.metadata = LoopbackMetadataServer().__enter__()
        self.addCleanup(self.metadata.__exit__, None, None, None)
        self.metadata.document = {
            "client_id": self.metadata.url,
            "client_name": "Agent",
            "redirect_uris": [REDIRECT_URI],
        }

    def hosts(self, *hosts: str):
        return override_settings(
            OAUTH2_PROVIDER=oauth2_provider_settings(self.base) | {"CIMD_ALLOWED_HOSTS": list(hosts)}
        )

    def open(self, challenge: str | None = None):
        challenge = challenge or pkce_pair()[1]
        url = authorization_url(self.base, self.metadata.url, code_challenge=challenge, code_challenge_method="S256")
        return self.browser.open_authorization(url)

    def test_a_document_from_an_unlisted_host_gets_the_refused_client_page_naming_the_policy(self) -> None:
        with self.hosts("agents.example.com"), self.assertLogs(AUDIT, "INFO") as captured:
            page = self.open()
        self.assertEqual(page.status_code, 400)
        self.assertIn("Refused by", page.text)
        self.assertIn(
            "the operator&#x27;s policy: metadata documents are accepted only from agents.example.com, "
            "and 127.0.0.1 is not one",
            page.text,
        )
        self.assertIn("CODEX_CIMD_ALLOWED_HOSTS", page.text)
        self.assertEqual(self.metadata.requests, 0)
        [line] = audit_lines(captured)
        self.assertEqual((line.policy, line.client_id), ("cimd_hosts", self.metadata.url))

    def test_a_document_from_a_listed_host_reaches_the_consent_page_and_is_refused_once_unlisted(self) -> None:
        with self.hosts("agents.example.com", "127.0.0.1"):
            consent = self.open()
        self.assertEqual(consent.status_code, 200, consent.text)
        self.assertIn("Allow <strong>Agent</strong>", consent.text)
        self.assertEqual(self.metadata.requests, 1)
        verifier, challenge = pkce_pair()
        with self.hosts("127.0.0.1"):
            code = query_of(self.browser.decide(self.open(challenge), allow=True).headers["location"])["code"]
            tokens = exchange_code(self.base, self.metadata.url, code, verifier)
        self.assertEqual(tokens.status_code, 200, tokens.text)
        # The application is known now; the policy still decides on every request, a refresh too.
        with self.hosts("agents.example.com"), self.assertLogs(AUDIT, "INFO") as captured:
            refused = self.open()
            refreshed = refresh(self.base, self.metadata.url, tokens.json()["refresh_token"])
        self.assertEqual(refused.status_code, 400)
        self.assertIn("Refused by", refused.text)
        self.assertEqual(refreshed.status_code, 401, refreshed.text)
        self.assertEqual(refreshed.json()["error"], "invalid_client")
        self.assertIn("Refused by the operator's policy", refreshed.json()["error_description"])
        self.assertEqual([line.policy for line in audit_lines(captured)], ["cimd_hosts", "cimd_hosts"])
        self.assertEqual(self.metadata.requests, 1)


@override_settings(CODEX_DCR_ENABLED=False)
class DynamicRegistrationOffTest(TestCase):
    def test_registration_is_refused_with_403_and_the_metadata_names_no_registration_endpoint(self) -> None:
        body = {"client_name": "Agent", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        with self.assertLogs(AUDIT, "INFO") as captured:
            response = self.client.post("/o/register/", json.dumps(body), content_type="application/json")
        self.assertEqual(response.status_code, 403)
        self.assertEqual(response.json()["error"], "access_denied")
        self.assertIn("CODEX_DCR_ENABLED", response.json()["error_description"])
        self.assertIn("Client ID Metadata Document", response.json()["error_description"])
        [line] = audit_lines(captured)
        self.assertEqual(line.policy, "dynamic_registration")
        for path in ("/.well-known/oauth-authorization-server/o", "/.well-known/oauth-authorization-server"):
            with self.subTest(path=path):
                metadata = self.client.get(path).json()
                self.assertNotIn("registration_endpoint", metadata)
                self.assertIn("token_endpoint", metadata)

    def test_a_registration_made_before_cannot_be_changed_but_can_be_read_and_removed(self) -> None:
        # RFC 7592's update can give an earlier registration new redirect URIs: registering anew
        # under an old name. With registration off that is refused too; reading and removing stay.
        body = {"client_name": "Agent", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        with self.settings(CODEX_DCR_ENABLED=True):
            registered = self.client.post("/o/register/", json.dumps(body), content_type="application/json").json()
        path = f"/o/register/{registered['client_id']}/"
        auth = {"HTTP_AUTHORIZATION": f"Bearer {registered['registration_access_token']}"}
        update = {**body, "client_id": registered["client_id"], "redirect_uris": ["https://elsewhere.example/cb"]}
        with self.assertLogs(AUDIT, "INFO") as captured:
            changed = self.client.put(path, json.dumps(update), content_type="application/json", **auth)
        self.assertEqual(changed.status_code, 403, changed.content)
        self.assertEqual(changed.json()["error"], "access_denied")
        self.assertIn("CODEX_DCR_ENABLED", changed.json()["error_description"])
        self.assertEqual(changed["Cache-Control"], "no-store")
        [line] = audit_lines(captured)
        # Refused before the token is checked, so the line names no client: the path's id is unproven.
        self.assertEqual((line.policy, line.client_id), ("dynamic_registration", None))
        read = self.client.get(path, **auth)
        self.assertEqual(read.status_code, 200, read.content)
        self.assertEqual(read.json()["redirect_uris"], [REDIRECT_URI])
        self.assertEqual(self.client.delete(path, **auth).status_code, 204)

    @override_settings(CODEX_DCR_ENABLED=True)
    def test_registration_on_registers_and_is_advertised(self) -> None:
        body = {"client_name": "Agent", "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        response = self.client.post("/o/register/", json.dumps(body), content_type="application/json")
        self.assertEqual(response.status_code, 201, response.content)
        metadata = self.client.get("/.well-known/oauth-authorization-server/o").json()
        self.assertTrue(metadata["registration_endpoint"].endswith("/o/register/"))


class AccessTokenLifetimeTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")

    @override_settings(CODEX_MAX_ACCESS_TOKEN_SECONDS=3600)
    def test_mint_token_refuses_a_lifetime_over_the_longest_and_mints_up_to_it(self) -> None:
        with self.assertLogs(AUDIT, "INFO") as captured, self.assertRaises(CommandError) as refused:
            call_command("mint_token", "alice", "--lifetime", "3601", stdout=io.StringIO(), stderr=io.StringIO())
        self.assertIn("3601 s is longer than the operator's policy allows: at most 3600 s", str(refused.exception))
        self.assertIn("CODEX_MAX_ACCESS_TOKEN_SECONDS", str(refused.exception))
        self.assertFalse(get_access_token_model().objects.exists())
        [line] = audit_lines(captured)
        self.assertEqual((line.policy, line.user_id), ("max_access_token_lifetime", self.alice.pk))
        call_command("mint_token", "alice", "--lifetime", "3600", stdout=io.StringIO(), stderr=io.StringIO())
        self.assertEqual(get_access_token_model().objects.count(), 1)

    @override_settings(CODEX_MAX_ACCESS_TOKEN_SECONDS=600)
    def test_mint_token_without_a_lifetime_keeps_within_a_shorter_longest(self) -> None:
        call_command("mint_token", "alice", stdout=io.StringIO(), stderr=io.StringIO())
        token = get_access_token_model().objects.get()
        self.assertLessEqual(token.expires, token.created + dt.timedelta(seconds=601))

    def test_a_configured_lifetime_over_the_longest_refuses_to_start(self) -> None:
        self.assertIsNone(configuration_problem())
        with override_settings(CODEX_MAX_ACCESS_TOKEN_SECONDS=60):
            problem = configuration_problem()
            self.assertIn("CODEX_ACCESS_TOKEN_SECONDS", problem)
            self.assertIn("CODEX_MAX_ACCESS_TOKEN_SECONDS", problem)
            with self.assertRaises(RefusedToStart):
                call_command("check", stdout=io.StringIO())

    def test_manage_py_refuses_to_start_with_the_environment_that_contradicts_the_policy(self) -> None:
        env = dict(
            os.environ,
            SECRET_KEY="x-not-real-key-just-for-the-check-0123456789abcdef",
            CODEX_ACCESS_TOKEN_SECONDS="7200",
            CODEX_MAX_ACCESS_TOKEN_SECONDS="3600",
        )
        env.pop("DJANGO_SETTINGS_MODULE", None)
        result = subprocess.run(
            [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn(
            "CODEX_ACCESS_TOKEN_SECONDS (OAUTH2_PROVIDER ACCESS_TOKEN_EXPIRE_SECONDS) is 7200 s", result.stderr
        )
        self.assertIn("CODEX_MAX_ACCESS_TOKEN_SECONDS", result.stderr)
        self.assertNotIn("Traceback", result.stderr)


@override_settings(CODEX_SSO_ONLY_DOMAINS=["acme.example"])
class SingleSignOnOnlyDomainsTest(TestCase):
    def setUp(self) -> None:
        users = get_user_model().objects
        self.bob = users.create_user("bob", email="bob@ACME.example", password="bob-password")
        self.carol = users.create_user("carol", email="carol@other.example", password="carol-password")

    def sign_in(self, login: str, password: str):
        return self.client.post("/accounts/login/", {"login": login, "password": password})

    def test_the_right_password_of_a_listed_domain_is_refused_with_the_way_to_sign_in(self) -> None:
        with self.assertLogs(AUDIT, "INFO") as captured:
            page = self.sign_in("bob", "bob-password")
        self.assertEqual(page.status_code, 200)
        self.assertIn("People of acme.example sign in with their organization&#x27;s sign-in", page.content.decode())
        self.assertNotIn("_auth_user_id", self.client.session)
        [line] = audit_lines(captured)
        self.assertEqual((line.policy, line.user_id), ("sso_only_domains", self.bob.pk))

    def test_a_wrong_password_of_a_listed_domain_gets_the_ordinary_error_and_no_line(self) -> None:
        with self.assertNoLogs(AUDIT, "INFO"):
            page = self.sign_in("bob", "wrong-password")
        self.assertEqual(page.status_code, 200)
        text = page.content.decode()
        self.assertIn("Your username and password did not match", text)
        self.assertNotIn("acme.example", text)
        self.assertNotIn("organization", text)

    def test_a_username_that_is_an_address_of_a_listed_domain_is_refused_too(self) -> None:
        get_user_model().objects.create_user("dave@acme.example", password="dave-password")
        page = self.sign_in("dave@acme.example", "dave-password")
        self.assertIn("single sign-on", page.content.decode())
        self.assertNotIn("_auth_user_id", self.client.session)

    def test_a_person_of_another_domain_signs_in_with_their_password(self) -> None:
        response = self.sign_in("carol", "carol-password")
        self.assertEqual(response.status_code, 302)
        self.assertEqual(int(self.client.session["_auth_user_id"]), self.carol.pk)

    def test_a_password_set_for_them_opens_nothing_and_the_change_form_refuses_it(self) -> None:
        self.bob.set_password("set-by-an-operator")
        self.bob.save()
        self.assertNotIn("_auth_user_id", self.sign_in("bob", "set-by-an-operator").wsgi_request.session)
        # Signed in by single sign-on, the password-change form's current password is a password check too.
        self.client.force_login(self.bob)
        page = self.client.post(
            "/accounts/password/change/",
            {
                "oldpassword": "set-by-an-operator",
                "password1": "a-new-pass-phrase-42",
                "password2": "a-new-pass-phrase-42",
            },
        )
        self.bob.refresh_from_db()
        self.assertTrue(self.bob.check_password("set-by-an-operator"))
        self.assertNotEqual(page.status_code, 302)


class PolicyAdminPageTest(TestCase):
    def setUp(self) -> None:
        users = get_user_model().objects
        self.operator = users.create_superuser("operator", password="operator-password")
        self.person = users.create_user("person", password="person-password")

    @override_settings(
        CODEX_DCR_ENABLED=False,
        CODEX_SSO_ONLY_DOMAINS=["acme.example"],
        CODEX_MAX_ACCESS_TOKEN_SECONDS=1800,
        CODEX_SSO_PROVIDERS=[
            {"id": "acme", "name": "Acme staff", "issuer": "https://login.acme.example", "domains": ["acme.example"]},
            {"id": "okta", "name": "Okta", "issuer": "https://okta.example", "domains": ["*"], "id_jag": True},
        ],
    )
    def test_staff_see_the_policy_in_force_linked_from_the_admin_index(self) -> None:
        self.client.force_login(self.operator)
        self.assertContains(self.client.get("/admin/"), 'href="/admin/policy/"')
        page = self.client.get("/admin/policy/")
        self.assertEqual(page.status_code, 200)
        text = page.content.decode()
        for setting in policy.effective():
            self.assertIn(setting.name, text)
        for shown in ("CODEX_DCR_ENABLED", "off", "1800 s", "acme.example", "Okta", "trusted", "ID-JAG"):
            self.assertIn(shown, text)
        # ID-JAGs from public clients: refused unless the operator turns them on.
        self.assertIn("CODEX_ID_JAG_PUBLIC_CLIENTS", text)
        [public_clients] = [setting for setting in policy.effective() if setting.name == "CODEX_ID_JAG_PUBLIC_CLIENTS"]
        self.assertEqual(public_clients.value, "off")
        with override_settings(CODEX_ID_JAG_PUBLIC_CLIENTS=True):
            [public_clients] = [s for s in policy.effective() if s.name == "CODEX_ID_JAG_PUBLIC_CLIENTS"]
        self.assertEqual(public_clients.value, "on")
        # The trusted providers' row names okta alone; the providers' table marks each.
        self.assertIn("<td>okta</td>", text)
        self.assertEqual(text.count("<td>trusted</td>"), 1)
        self.assertEqual(text.count("<td>no</td>"), 1)

    def test_a_person_who_is_not_staff_does_not_see_it(self) -> None:
        self.client.force_login(self.person)
        response = self.client.get("/admin/policy/")
        self.assertEqual(response.status_code, 302)
        self.assertNotIn("CODEX_SSO_ONLY_DOMAINS", response.content.decode())
        self.assertEqual(Client().get("/admin/policy/").status_code, 302)


class RevocationByTheClientTest(LiveServerTestCase):
    def test_a_client_revoking_its_token_writes_one_line_by_the_client(self) -> None:
        alice = self.make_user("alice")
        base = self.live.base_url
        client_id = register_client(base).json()["client_id"]
        browser = Browser(base, "alice", "alice-password")
        self.addCleanup(browser.close)
        verifier, challenge = pkce_pair()
        url = authorization_url(base, client_id, code_challenge=challenge, code_challenge_method="S256")
        tokens = exchange_code(base, client_id, browser.authorize(url)["code"], verifier).json()
        with self.assertLogs(AUDIT, "INFO") as captured:
            revoked = browser.http.post(
                base + "/o/revoke_token/", data={"token": tokens["access_token"], "client_id": client_id}
            )
            unknown = browser.http.post(base + "/o/revoke_token/", data={"token": "no-such", "client_id": client_id})
        self.assertEqual((revoked.status_code, unknown.status_code), (200, 200))
        [line] = audit_lines(captured, "token.revoked")
        self.assertEqual(
            (line.user_id, line.client_id, line.by, line.access_tokens), (alice.pk, client_id, "client", 1)
        )
        self.assertFalse(get_access_token_model().objects.filter(user=alice).exists())
