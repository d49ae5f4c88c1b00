"""Every door that reads a stranger's JSON reads it through ``common.inputs.json_document``, so
that each refuses in its own words, never with a 500.

JSON: a metadata document (the authorization page), a client's key set behind its ``jwks_uri``
(the token endpoint), an IdP's discovery document and key set (the ID-JAG grant), a pasted key set
(the new-agent page), a sign-in provider's answers, a registration and an export file."""

import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.test import override_settings
from django.urls import reverse
from oauth2_provider.models import get_access_token_model, get_application_model

from authserver.models import ClientKeys, HeadlessAgent
from notebook import transfer
from tests.base import NotebookTestCase
from tests.hosted_clients import ChatGPTLike, public_jwk
from tests.live import LiveServerTestCase
from tests.loopback_http import DocumentsServer, LoopbackHTTPServer
from tests.oauth_helpers import REDIRECT_URI, Browser, authorization_url, forms_of, pkce_pair
from tests.oidc import sso_settings
from tests.test_headless_agents import AgentPage
from tests.test_hostile_accounts import StubProvider, good_answers
from tests.test_id_jag import KEY, provider_entry, signed

Application = get_application_model()
NESTED = b"[" * 16_000  # past every parser's depth: json.loads raised RecursionError on it
IMPORT = reverse("mycodex:import")


def document(client_id: str, **members: Any) -> dict[str, Any]:
    return {"client_id": client_id, "client_name": "Agent", "redirect_uris": [REDIRECT_URI], **members}


class MetadataDocumentsTest(LiveServerTestCase):
    """The authorization page of a client whose document is not JSON this server reads: the
    refused-client page, in words, and no application."""

    def setUp(self) -> None:
        self.documents = self.enterContext(DocumentsServer())

    def open(self, path: str, served: Any) -> httpx2.Response:
        self.documents.documents[path] = served
        client_id = self.documents.origin + path
        url = authorization_url(
            self.live.base_url, client_id, code_challenge=pkce_pair()[1], code_challenge_method="S256"
        )
        answer = httpx2.get(url, timeout=30)
        self.assertFalse(Application.objects.filter(client_id=client_id).exists())
        return answer

    def test_a_document_nested_past_the_parsers_limit_is_refused_in_words(self) -> None:
        answer = self.open("/nested.json", NESTED)
        self.assertEqual(answer.status_code, 400, answer.text[:500])
        self.assertIn("could not be read", answer.text)
        self.assertIn("nested too deeply", answer.text)

    def test_a_document_whose_name_holds_a_lone_surrogate_is_refused_in_words(self) -> None:
        client_id = self.documents.origin + "/surrogate.json"
        # json.dumps writes the lone surrogate as the escape \ud800, as a hostile server would.
        answer = self.open("/surrogate.json", json.dumps(document(client_id, client_name="Agent\ud800")).encode())
        self.assertEqual(answer.status_code, 400, answer.text[:500])
        self.assertIn("is not JSON", answer.text)

    def test_a_document_holding_a_number_too_large_to_be_finite_is_refused(self) -> None:
        client_id = self.documents.origin + "/infinite.json"
        raw = json.dumps(document(client_id)).encode()[:-1] + b', "default_max_age": 1e400}'
        answer = self.open("/infinite.json", raw)
        self.assertEqual(answer.status_code, 400, answer.text[:500])
        self.assertIn("too large to be finite", answer.text)


class KeySetsTest(LiveServerTestCase):
    """A client's key set behind its ``jwks_uri`` that is not JSON this server reads: the token
    endpoint answers ``invalid_client`` in words."""

    def setUp(self) -> None:
        caches["default"].clear()  # a key set that failed is not fetched again for a minute
        self.documents = self.enterContext(DocumentsServer())
        self.chatgpt = ChatGPTLike(self.documents)
        Application.objects.create(
            client_id=self.chatgpt.client_id,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            registration_source=Application.RegistrationSource.CIMD,
            cimd_expires_at=None,
        )
        ClientKeys.objects.create(
            client_id=self.chatgpt.client_id, jwks_uri=self.chatgpt.jwks_uri, signing_algorithm="RS256"
        )

    def token_request(self) -> httpx2.Response:
        return self.chatgpt.token_request(
            self.live.base_url,
            {"grant_type": "authorization_code", "code": "c", "redirect_uri": REDIRECT_URI},
            self.chatgpt.assertion(self.live.base_url + "/o"),
        )

    def test_a_nested_key_set_is_invalid_client_in_words(self) -> None:
        self.documents.documents["/oauth/jwks.json"] = NESTED
        answer = self.token_request()
        self.assertEqual(answer.status_code, 401, answer.text)
        self.assertEqual(answer.json()["error"], "invalid_client")
        self.assertIn("nested too deeply", answer.json()["error_description"])

    def test_a_key_set_holding_a_lone_surrogate_is_invalid_client_in_words(self) -> None:
        key = public_jwk(self.chatgpt.key, self.chatgpt.kid, "RS256")
        self.documents.documents["/oauth/jwks.json"] = json.dumps({"keys": [{**key, "x-note": "\udc00"}]}).encode()
        answer = self.token_request()
        self.assertEqual(answer.status_code, 401, answer.text)
        self.assertIn("is not JSON", answer.json()["error_description"])


class IdentityProvidersTest(LiveServerTestCase):
    """An IdP's discovery document or key set that is not JSON this server reads: the ID-JAG grant
    answers ``invalid_grant`` in words, and issues nothing."""

    def setUp(self) -> None:
        self.documents = self.enterContext(DocumentsServer())
        origin = self.documents.origin
        self.documents.documents = {
            "/.well-known/openid-configuration": {"issuer": origin, "jwks_uri": origin + "/jwks"},
            "/jwks": {"keys": [public_jwk(KEY, "idp-1", "RS256")]},
        }
        self.enterContext(override_settings(**sso_settings(provider_entry(origin)), CODEX_CIMD_ALLOW_LOOPBACK=True))
        self.agent = Application.objects.create(
            name="Acme agent",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            client_secret="agent-secret",
        )

    def present(self) -> httpx2.Response:
        now = int(time.time())
        claims = {
            "iss": self.documents.origin,
            "sub": "alice-at-acme",
            "aud": self.live.base_url + "/o",
            "resource": self.live.base_url + "/mcp",
            "client_id": self.agent.client_id,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "exp": now + 300,
            "scope": "notes:read",
        }
        data = {
            "grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
            "assertion": signed(claims),
            "client_id": self.agent.client_id,
            "client_secret": "agent-secret",
            "resource": self.live.base_url + "/mcp",
        }
        return httpx2.post(self.live.base_url + "/o/token/", data=data, timeout=30)

    def test_a_nested_discovery_document_or_key_set_is_invalid_grant_in_words(self) -> None:
        for path in ("/.well-known/openid-configuration", "/jwks"):
            with self.subTest(path):
                good = self.documents.documents[path]
                self.documents.documents[path] = NESTED
                caches["default"].clear()  # a key set that failed is not fetched again for a while
                answer = self.present()
                self.documents.documents[path] = good
                self.assertEqual(answer.status_code, 400, answer.text)
                self.assertEqual(answer.json()["error"], "invalid_grant")
                self.assertIn("nested too deeply", answer.json()["error_description"])
        self.assertFalse(get_access_token_model().objects.exists())


class PastedKeySetTest(LiveServerTestCase):
    """A key set pasted on the new-agent page that is not JSON this server reads: the page says why."""

    def test_a_nested_or_broken_key_set_is_refused_on_the_page_in_words(self) -> None:
        self.make_user("alice")
        browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(browser.close)
        page = AgentPage(browser)
        for pasted, words in [
            ("[" * 15_000, "nested too deeply"),
            ('{"keys": [{"kty": "RSA", "n": 1e400}]}', "too large to be finite"),
            ('{"keys": [}', "is not JSON"),
        ]:
            with self.subTest(words):
                answer = page.make("cron", ["notes:read"], public_key=pasted)
                self.assertEqual(answer.status_code, 400, answer.text[:500])
                self.assertIn(words, answer.text)
        self.assertFalse(HeadlessAgent.objects.exists())


class SignInProviderTest(LiveServerTestCase):
    """A sign-in provider's answers are read as any stranger's JSON: one nested too deeply, or one
    holding a lone surrogate, gets a page that says the provider's answer could not be used, and
    no account."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.stub = cls.enterClassContext(LoopbackHTTPServer(StubProvider))
        cls.issuer = f"http://127.0.0.1:{cls.stub.port}"
        provider = {"id": "stub", "issuer": cls.issuer, "client_id": "c", "secret": "s", "domains": ["acme.test"]}
        cls.enterClassContext(override_settings(**sso_settings(provider), ACCOUNT_RATE_LIMITS=False))

    def setUp(self) -> None:
        StubProvider.answers = good_answers(self.issuer)
        self.http = self.enterContext(httpx2.Client(base_url=self.live.base_url, timeout=30))

    def sign_in(self) -> httpx2.Response:
        """Sign in through the provider; the answer that ends it (the callback's, or the start's)."""
        page = self.http.get("/accounts/oidc/stub/login/")
        form = next(f for f in forms_of(page.text) if "csrfmiddlewaretoken" in f["fields"])
        started = self.http.post("/accounts/oidc/stub/login/", data={**form["fields"], "process": "login"})
        if started.status_code != 302 or not started.headers["location"].startswith(self.issuer):
            return started
        state = parse_qs(urlsplit(started.headers["location"]).query)["state"][0]
        return self.http.get("/accounts/oidc/stub/login/callback/", params={"state": state, "code": "c"})

    def test_a_good_provider_signs_in(self) -> None:
        self.assertEqual(self.sign_in().status_code, 302)
        self.assertTrue(get_user_model().objects.filter(email="pat@acme.test").exists())

    def test_a_nested_discovery_document_gets_the_providers_page(self) -> None:
        StubProvider.answers["/.well-known/openid-configuration"] = (200, NESTED)
        answer = self.sign_in()
        self.assertEqual(answer.status_code, 502, answer.text[:500])
        self.assertIn("The sign-in provider could not be used", answer.text)

    def test_an_answer_holding_a_lone_surrogate_makes_no_account(self) -> None:
        for path, answer in {
            "/userinfo": {"sub": "\ud800", "email": "pat@acme.test", "email_verified": True},
            "/token": {"access_token": "at\udfff", "token_type": "Bearer"},
        }.items():
            with self.subTest(path):
                StubProvider.answers = good_answers(self.issuer)
                StubProvider.answers[path] = (200, json.dumps(answer).encode())
                ended = self.sign_in()
                # Refused as the provider's answer, before allauth read it: the callback's own page.
                self.assertEqual(ended.status_code, 401, ended.text[:500])
                self.assertIn("The provider's answer could not be used", ended.text)
                self.assertFalse(get_user_model().objects.filter(email="pat@acme.test").exists())


class RegistrationAndImportTest(NotebookTestCase):
    """A registration body and an export file (the two doors that always parsed with the SDK's
    parser) read through the same function: numbers too large to be finite, and a text with a lone
    surrogate, refused in their words."""

    def test_a_registration_holding_a_number_too_large_to_be_finite_is_invalid_metadata(self) -> None:
        body = b'{"redirect_uris": ["' + REDIRECT_URI.encode() + b'"], "default_max_age": 1e400}'
        answer = self.client.post("/o/register/", body, content_type="application/json")
        self.assertEqual(answer.status_code, 400, answer.content)
        self.assertEqual(answer.json()["error"], "invalid_client_metadata")
        self.assertIn("too large to be finite", answer.json()["error_description"])

    def test_an_export_given_as_a_text_with_a_lone_surrogate_is_refused_in_words(self) -> None:
        with self.assertRaisesMessage(transfer.ImportRefused, "it is not JSON"):
            transfer.load_document('{"format": "agent-codex-export", "x": "\ud800"}')
