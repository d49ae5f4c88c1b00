"""Every door that reads a stranger's JSON reads it through ``common.inputs.json_document``, and
every door that takes a name holds it to ``common.inputs.name_problem``, so that each refuses in
its own words, never with a 500, and a name one door accepts every door accepts.

JSON: a metadata document (the authorization page), a client's key set behind its ``jwks_uri``
(the token endpoint), an IdP's discovery document and key set (the ID-JAG grant), a pasted key set
(the new-agent page), a sign-in provider's answers, a registration and an export file. Names:
Dynamic Client Registration, a metadata document, a headless agent, and an export's writers on
import; the property test at the end holds that any name registration accepts comes back from the
person's own export."""

import copy
import json
import time
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client, override_settings
from django.urls import reverse
from hypothesis import HealthCheck, example, given
from hypothesis import settings as examples
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase
from oauth2_provider.models import get_access_token_model, get_application_model

from authserver.clients.registration import CLIENT_NAME_MAX_CHARS
from authserver.models import ClientKeys, HeadlessAgent
from common.inputs import name_problem
from notebook import services, transfer
from notebook.models import Entry, EntryRevision
from notebook.validation import parse_entry_input
from notebook.writers import Writer
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


# --- names --------------------------------------------------------------------------------------

ACCEPTED_NAMES = ["Acme\u00a0Agent", "エージェント\u3000一号", "\U0001f469\u200d\U0001f4bb Dev"]
REFUSED_NAMES = ["Evil\u202eAgent", "Evil\u2028Agent", "Evil\u2029Agent", "Cl\u200baude", "\ufeffClaude"]


class NamesAtEveryDoorTest(LiveServerTestCase):
    """Registration, a metadata document and a headless agent accept and refuse the same names."""

    def register(self, name: str) -> httpx2.Response:
        body = {"client_name": name, "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        return httpx2.post(self.live.base_url + "/o/register/", json=body, timeout=30)

    def test_registration_refuses_what_changes_how_a_name_is_shown_and_accepts_every_space(self) -> None:
        for name in ACCEPTED_NAMES:
            with self.subTest(name=name):
                answer = self.register(name)
                self.assertEqual(answer.status_code, 201, answer.text)
                self.assertEqual(Application.objects.get(client_id=answer.json()["client_id"]).name, name)
        for name in REFUSED_NAMES:
            with self.subTest(name=name):
                answer = self.register(name)
                self.assertEqual(answer.status_code, 400, answer.text)
                self.assertEqual(answer.json()["error"], "invalid_client_metadata")
                self.assertIn("client_name contains a character", answer.json()["error_description"])

    def test_a_metadata_document_is_held_to_the_same_rule(self) -> None:
        documents = self.enterContext(DocumentsServer())
        for number, name in enumerate([*ACCEPTED_NAMES, *REFUSED_NAMES, "Evil\x1b[31m\u2028Agent"]):
            with self.subTest(name=name):
                client_id = f"{documents.origin}/name-{number}.json"
                documents.documents[f"/name-{number}.json"] = document(client_id, client_name=name)
                url = authorization_url(
                    self.live.base_url, client_id, code_challenge=pkce_pair()[1], code_challenge_method="S256"
                )
                answer = httpx2.get(url, timeout=30)
                if name in ACCEPTED_NAMES:
                    self.assertEqual(answer.status_code, 302, answer.text[:500])  # on to sign in
                    self.assertEqual(Application.objects.get(client_id=client_id).name, name)
                else:
                    self.assertEqual(answer.status_code, 400, answer.text[:500])
                    self.assertIn("client_name", answer.text)
                    self.assertFalse(Application.objects.filter(client_id=client_id).exists())

    def test_a_headless_agents_name_is_held_to_the_same_rule(self) -> None:
        self.make_user("alice")
        browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(browser.close)
        page = AgentPage(browser)
        for name in REFUSED_NAMES:
            with self.subTest(name=name):
                answer = page.make(name, ["notes:read"])
                self.assertEqual(answer.status_code, 400, answer.text[:500])
                self.assertIn("The name contains a character", answer.text)
        self.assertFalse(HeadlessAgent.objects.exists())
        answer = page.make("Acme\u00a0Agent", ["notes:read"])
        self.assertEqual(answer.status_code, 200, answer.text[:500])
        self.assertEqual(HeadlessAgent.objects.get().name, "Acme\u00a0Agent")


def written_by(codex, writer: Writer) -> Entry:
    return services.entry_save(
        codex=codex, request_id=str(uuid.uuid4()), data=parse_entry_input({"content": "a note"}), writer=writer
    )


class ExportedNamesImportTest(NotebookTestCase):
    """The person's own export imports, whatever its writers were called."""

    def setUp(self) -> None:
        self.client.force_login(self.alice)

    def export_and_import_again(self) -> dict[str, Any]:
        exported = json.loads(b"".join(self.client.get(reverse("mycodex:export")).streaming_content))
        services.codex_clear(codex=self.alice_codex)
        answer = self.client.post(IMPORT, {"file": SimpleUploadedFile("codex.json", json.dumps(exported).encode())})
        self.assertEqual(answer.status_code, 200, answer.content[:1000])
        self.assertEqual(Entry.objects.filter(codex=self.alice_codex).count(), 1)
        return exported

    def test_a_note_written_by_a_client_whose_name_holds_a_no_break_space_comes_back(self) -> None:
        writer = Writer.application(application_id=None, client_id="c-1", name="Acme\u00a0Agent", scopes=frozenset())
        written_by(self.alice_codex, writer)
        self.export_and_import_again()
        self.assertEqual(EntryRevision.objects.get(entry__codex=self.alice_codex).writer_name, "Acme\u00a0Agent")

    def test_a_name_recorded_before_the_rule_is_exported_as_the_rule_accepts_it(self) -> None:
        # An application registered before the name rule held could be named with U+202E.
        writer = Writer.application(application_id=None, client_id="c-1", name="Evil\u202eAgent", scopes=frozenset())
        written_by(self.alice_codex, writer)
        exported = self.export_and_import_again()
        self.assertEqual(exported["entries"][0]["revisions"][0]["writer"]["name"], "Evil\ufffdAgent")
        self.assertEqual(EntryRevision.objects.get(entry__codex=self.alice_codex).writer_name, "Evil\ufffdAgent")

    def test_an_export_naming_a_writer_with_a_right_to_left_override_is_refused(self) -> None:
        written_by(
            self.alice_codex, Writer.application(application_id=None, client_id="c-1", name="Agent", scopes=frozenset())
        )
        exported = json.loads(b"".join(self.client.get(reverse("mycodex:export")).streaming_content))
        services.codex_clear(codex=self.alice_codex)
        changed = copy.deepcopy(exported)
        changed["entries"][0]["revisions"][0]["writer"]["name"] = "Evil\u202eAgent"
        answer = self.client.post(IMPORT, {"file": SimpleUploadedFile("codex.json", json.dumps(changed).encode())})
        self.assertContains(answer, "writer.name contains a character", status_code=400)
        self.assertFalse(Entry.objects.filter(codex=self.alice_codex).exists())


@override_settings(CODEX_DCR_RATE_LIMIT=1_000_000)
class RegisteredNamesRoundTripTest(HypothesisTestCase):
    """Any name registration accepts is one the person's export and import carry back, and
    registration accepts exactly the names the rule accepts."""

    @classmethod
    def setUpTestData(cls) -> None:
        cls.alice_codex = services.codex_for_user(user=get_user_model().objects.create_user("alice"))
        cls.bob_codex = services.codex_for_user(user=get_user_model().objects.create_user("bob"))

    @examples(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(name=st.text(alphabet=st.characters(codec=None), max_size=CLIENT_NAME_MAX_CHARS + 2))
    @example(name="Acme\u00a0Agent")
    @example(name="Evil\u202eAgent")
    def test_any_name_registration_accepts_round_trips_through_an_export(self, name: str) -> None:
        body = {"client_name": name, "redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "none"}
        answer = Client().post("/o/register/", json.dumps(body), content_type="application/json")
        accepted = name_problem(name, max_chars=CLIENT_NAME_MAX_CHARS, what="client_name") is None
        self.assertEqual(answer.status_code, 201 if accepted else 400, answer.content[:300])
        if not accepted:
            return
        application = Application.objects.get(client_id=answer.json()["client_id"])
        writer = Writer.application(
            application_id=application.pk,
            client_id=application.client_id,
            name=application.name,
            scopes=frozenset({"notes:write"}),
        )
        written_by(self.alice_codex, writer)
        exported = "".join(transfer.export_json_chunks(codex=self.alice_codex))
        report = transfer.codex_import(codex=self.bob_codex, document=transfer.load_document(exported))
        self.assertTrue(report.applied, report.refused)
        self.assertEqual(EntryRevision.objects.get(entry__codex=self.bob_codex).writer_name, name)
