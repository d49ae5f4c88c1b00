"""One redirect-URI rule at every door that registers one (Dynamic Client Registration, its RFC 7592
update, a Client ID Metadata Document), and what the authorization endpoint does with what it let in:

- https anywhere; http only to a loopback address; a private-use scheme (RFC 8252 §7.1) only for a
  public client; no fragment, no wildcard, no user information; never a scheme a browser handles
  itself (javascript:, data:, file:, ...). Each refusal names the URI and says why.
- django-oauth-toolkit's own checks (its model's clean, its scheme check on redirects) agree with
  the rule: they refuse nothing it accepts and accept nothing it refuses.
- At the authorization endpoint a private-use redirect URI is matched exactly, and PKCE S256 is
  still required of the client that registered it; a refused answer still goes back to it, with
  ``iss`` (RFC 9207).
"""

import json

from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, SimpleTestCase, TestCase, override_settings
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase
from oauth2_provider.models import get_application_model

from tests.hosted_clients import ChatGPTLike
from tests.loopback_http import DocumentsServer
from tests.oauth_helpers import REDIRECT_URI, pkce_pair, query_of

Application = get_application_model()
CURSOR = "cursor://anysphere.cursor-mcp/oauth/callback"

# (redirect URI, words its refusal must hold): each refused for a public client and a confidential one.
REFUSED_FOR_EVERY_CLIENT = [
    ("http://evil.example/cb", "plain http"),
    ("http://localhost.evil.example/cb", "plain http"),
    ("http://127.0.0.1.nip.io/cb", "plain http"),
    ("javascript:alert(1)", "javascript:"),
    ("JavaScript://x/%0aalert(1)", "javascript:"),
    ("data:text/html,<script>alert(1)</script>", "data:"),
    ("file:///etc/passwd", "file:"),
    ("vbscript:msgbox", "vbscript:"),
    ("blob:https://evil.example/3f0e", "blob:"),
    ("about:blank", "about:"),
    ("ftp://evil.example/cb", "ftp:"),
    ("https://claude.ai/api/mcp/auth_callback#x", "fragment"),
    ("https://claude.ai/api/mcp/auth_callback#", "fragment"),
    ("https://*.claude.ai/callback", "wildcard"),
    ("https://claude.ai/*", "wildcard"),
    ("https://claude.ai@evil.example/cb", "user information"),
    ("https:/evil.example/cb", "not a valid URI"),
    ("http://127.0.0.1:99999/cb", "port"),
    ("//evil.example/cb", "scheme"),
    ("/callback", "scheme"),
    ("1cursor://x/cb", "scheme"),
]
REFUSED_FOR_A_CONFIDENTIAL_CLIENT = [
    (CURSOR, "public client"),
    ("vscode://acme.notes/callback", "public client"),
    ("com.example.app:/oauth2redirect", "public client"),
]
ACCEPTED_FOR_A_PUBLIC_CLIENT = [
    "https://claude.ai/api/mcp/auth_callback",
    "https://app.example.com:8443/cb?tenant=a",
    "http://localhost:8787/callback",
    "http://localhost/",
    "http://127.0.0.1/",
    "http://127.0.0.1:33418/",
    "http://[::1]:33418/cb",
    CURSOR,
    "vscode://acme.notes/callback",
    "vscode-insiders://linear.linear-connect/callback",
    "com.example.app:/oauth2redirect",
]


def register(body: dict, **extra):
    return Client().post("/o/register/", json.dumps(body), content_type="application/json", **extra)


def public(*uris: str) -> dict:
    return {"client_name": "Agent", "redirect_uris": list(uris), "token_endpoint_auth_method": "none"}


def confidential(*uris: str) -> dict:
    return {"client_name": "Agent", "redirect_uris": list(uris), "token_endpoint_auth_method": "client_secret_basic"}


@override_settings(CODEX_DCR_RATE_LIMIT=1_000_000)
class RegistrationTest(TestCase):
    def assert_refused(self, answer, uri: str, words: str, *, index: int = 0) -> None:
        self.assertEqual(answer.status_code, 400, answer.content)
        error = answer.json()
        self.assertEqual(error["error"], "invalid_redirect_uri", error)
        self.assertIn(f"redirect_uris[{index}]", error["error_description"])
        self.assertIn(uri[:60], error["error_description"])
        self.assertIn(words, error["error_description"])

    def test_each_refused_uri_is_refused_by_name_and_registers_nothing(self) -> None:
        cases = [(uri, words, body) for uri, words in REFUSED_FOR_EVERY_CLIENT for body in (public, confidential)]
        cases += [(uri, words, confidential) for uri, words in REFUSED_FOR_A_CONFIDENTIAL_CLIENT]
        for uri, words, body in cases:
            with self.subTest(uri=uri, client=body.__name__):
                self.assert_refused(register(body(uri)), uri, words)
        self.assertEqual(Application.objects.count(), 0)

    def test_one_refused_uri_among_good_ones_refuses_the_registration_and_names_it(self) -> None:
        answer = register(public(CURSOR, "https://www.cursor.com/agents/mcp/oauth/callback", "http://evil.example/cb"))
        self.assert_refused(answer, "http://evil.example/cb", "plain http", index=2)
        self.assertEqual(Application.objects.count(), 0)

    def test_each_accepted_uri_registers_a_public_client(self) -> None:
        for uri in ACCEPTED_FOR_A_PUBLIC_CLIENT:
            with self.subTest(uri=uri):
                answer = register(public(uri))
                self.assertEqual(answer.status_code, 201, answer.content)
                self.assertEqual(answer.json()["redirect_uris"], [uri])

    def test_a_confidential_client_may_use_https_and_loopback_http(self) -> None:
        answer = register(confidential("https://agent.example/cb", "http://127.0.0.1:9/cb"))
        self.assertEqual(answer.status_code, 201, answer.content)


@override_settings(CODEX_DCR_RATE_LIMIT=1_000_000)
class UpdateTest(TestCase):
    """RFC 7592: an update is a registration again, under the same rule."""

    def setUp(self) -> None:
        self.registered = register(public(REDIRECT_URI)).json()
        self.path = f"/o/register/{self.registered['client_id']}/"
        self.auth = {"HTTP_AUTHORIZATION": f"Bearer {self.registered['registration_access_token']}"}

    def update(self, body: dict):
        body = {**body, "client_id": self.registered["client_id"]}
        answer = Client().put(self.path, json.dumps(body), content_type="application/json", **self.auth)
        if answer.status_code == 200:  # the registration access token rotates with each update
            self.auth = {"HTTP_AUTHORIZATION": f"Bearer {answer.json()['registration_access_token']}"}
        return answer

    def test_each_refused_uri_is_refused_and_the_registration_is_unchanged(self) -> None:
        cases = [(uri, words, public) for uri, words in REFUSED_FOR_EVERY_CLIENT]
        cases += [(uri, words, confidential) for uri, words in REFUSED_FOR_A_CONFIDENTIAL_CLIENT]
        for uri, words, body in cases:
            with self.subTest(uri=uri):
                answer = self.update(body(uri))
                self.assertEqual(answer.status_code, 400, answer.content)
                self.assertEqual(answer.json()["error"], "invalid_redirect_uri")
                self.assertIn(words, answer.json()["error_description"])
        application = Application.objects.get(client_id=self.registered["client_id"])
        self.assertEqual((application.redirect_uris, application.client_type), (REDIRECT_URI, "public"))

    def test_a_public_client_may_move_to_its_own_scheme_but_not_keep_it_as_a_confidential_one(self) -> None:
        self.assertEqual(self.update(public(CURSOR)).status_code, 200)
        refused = self.update(confidential(CURSOR))
        self.assertEqual(refused.status_code, 400, refused.content)
        self.assertIn("public client", refused.json()["error_description"])
        self.assertEqual(Application.objects.get(client_id=self.registered["client_id"]).redirect_uris, CURSOR)


@override_settings(CODEX_CIMD_RATE_LIMIT=1_000_000)
class MetadataDocumentTest(TestCase):
    """A document's redirect URIs, under the same rule: the refused-client page says which and why."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())

    def refusal_page(self, name: str, document: dict, redirect_uri: str):
        client_id = f"{self.documents.origin}/clients/{name}.json"
        self.documents.documents[f"/clients/{name}.json"] = {"client_id": client_id, "client_name": "Agent", **document}
        _, challenge = pkce_pair()
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "state": "st-1",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        return Client().get("/o/authorize/", query)

    def test_each_refused_uri_gets_the_refused_client_page_naming_it(self) -> None:
        for number, (uri, words) in enumerate(REFUSED_FOR_EVERY_CLIENT):
            with self.subTest(uri=uri):
                page = self.refusal_page(f"c{number}", {"redirect_uris": [REDIRECT_URI, uri]}, REDIRECT_URI)
                self.assertEqual(page.status_code, 400, page.get("Location"))
                text = page.content.decode()
                self.assertIn("What could not be used", text)
                self.assertIn(words, text)
                self.assertIn("redirect", text)
        self.assertEqual(Application.objects.count(), 0)

    def test_a_document_is_held_to_the_limits_a_registration_is_held_to(self) -> None:
        long = "https://agent.example/" + "a" * 2_030
        for number, (uris, words) in enumerate(
            [
                ([f"https://agent.example/{n}" for n in range(33)], "there are 33 of them; the limit is 32"),
                ([REDIRECT_URI, long], "the limit is 2048"),
                ([REDIRECT_URI, "https://agent.example/a b"], "white space"),
                ([REDIRECT_URI, "https://agent.example/\u2028"], "white space"),
                ([REDIRECT_URI, "https://agent.example/\x07"], "control character"),
            ]
        ):
            with self.subTest(words):
                page = self.refusal_page(f"limits-{number}", {"redirect_uris": uris}, REDIRECT_URI)
                self.assertEqual(page.status_code, 400, page.get("Location"))
                self.assertIn(words, page.content.decode())
        self.assertEqual(Application.objects.count(), 0)

    def test_a_private_key_jwt_document_may_not_use_an_application_scheme(self) -> None:
        chatgpt = ChatGPTLike(self.documents, connector="desktop")
        chatgpt.document["redirect_uris"] = [CURSOR]
        chatgpt.publish()
        _, challenge = pkce_pair()
        query = {
            "response_type": "code",
            "client_id": chatgpt.client_id,
            "redirect_uri": CURSOR,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        page = Client().get("/o/authorize/", query)
        self.assertEqual(page.status_code, 400, page.get("Location"))
        self.assertIn("public client", page.content.decode())
        self.assertEqual(Application.objects.count(), 0)

    def test_a_public_document_may_use_its_application_scheme(self) -> None:
        page = self.refusal_page("cursor-like", {"redirect_uris": [CURSOR]}, CURSOR)
        self.assertEqual(page.status_code, 302, page.content[:500])
        self.assertIn("/accounts/login/", page["Location"])  # on to sign in: nothing was refused


@override_settings(CODEX_DCR_RATE_LIMIT=1_000_000)
class AuthorizationEndpointTest(TestCase):
    """What the authorization endpoint does with a private-use redirect URI it let in."""

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.browser = Client()
        self.browser.force_login(self.alice)
        self.client_id = register(public(CURSOR)).json()["client_id"]

    def authorize(self, redirect_uri: str = CURSOR, *, browser: Client | None = None, **extra: str):
        _, challenge = pkce_pair()
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": redirect_uri,
            "state": "st-1",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            **extra,
        }
        present = {key: value for key, value in query.items() if value is not None}
        return (browser or self.browser).get("/o/authorize/", present)

    def test_near_misses_of_the_registered_uri_get_the_error_page_and_no_redirect(self) -> None:
        for near_miss in [
            CURSOR + "/extra",
            CURSOR + "?x=1",
            CURSOR + "#",
            "vscode://anysphere.cursor-mcp/oauth/callback",
            "cursor://evil.example/oauth/callback",
            "cursor://anysphere.cursor-mcp:443/oauth/callback",
            "cursor://evil@anysphere.cursor-mcp/oauth/callback",
            "cursor:/anysphere.cursor-mcp/oauth/callback",
            "https://anysphere.cursor-mcp/oauth/callback",
        ]:
            with self.subTest(near_miss=near_miss):
                page = self.authorize(near_miss)
                self.assertEqual(page.status_code, 400, page.get("Location"))
                self.assertNotIn("Location", page)
                self.assertIn("is not one of the redirect_uris it registered", page.content.decode())

    def test_pkce_is_required_of_it_and_the_refusal_goes_back_to_it_with_iss(self) -> None:
        for browser in (self.browser, Client()):
            for missing in [
                {"code_challenge": None, "code_challenge_method": None},
                {"code_challenge_method": "plain"},
            ]:
                with self.subTest(signed_in=browser is self.browser, missing=missing):
                    answer = self.authorize(browser=browser, **missing)
                    self.assertEqual(answer.status_code, 302, answer.content[:500])
                    self.assertTrue(answer["Location"].startswith(CURSOR + "?"), answer["Location"])
                    redirect = query_of(answer["Location"])
                    self.assertEqual(
                        (redirect["error"], redirect["state"], redirect["iss"]),
                        ("invalid_request", "st-1", settings.CODEX_ISSUER_URL),
                    )
                    self.assertNotIn("code", redirect)

    def test_the_consent_page_names_the_application_and_its_form_may_lead_to_its_scheme(self) -> None:
        page = self.authorize()
        self.assertEqual(page.status_code, 200, page.get("Location"))
        text = " ".join(page.content.decode().split())
        self.assertIn("your answer goes to <strong>Cursor</strong>", text)
        self.assertIn("runs on your own computer", text)
        policy = {part.split()[0]: part.split()[1:] for part in page["Content-Security-Policy"].split(";") if part}
        self.assertEqual(policy["form-action"], ["'self'", "cursor:"])

    def test_an_unknown_scheme_is_named_as_an_application_on_this_computer_never_as_a_bare_uri(self) -> None:
        uri = "com.example.notes:/oauth2redirect"
        self.client_id = register(public(uri)).json()["client_id"]
        page = self.authorize(uri)
        self.assertEqual(page.status_code, 200, page.get("Location"))
        text = " ".join(page.content.decode().split())
        self.assertIn("the application on this computer that is registered to open", text)
        self.assertIn("<strong>com.example.notes:</strong> links", text)
        self.assertNotIn("sent back to", text)

    def test_a_registration_made_before_the_rule_is_not_sent_to_a_uri_it_refuses(self) -> None:
        # A row an older release let in (it accepted plain http to any host).
        legacy = Application.objects.create(
            name="Old",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://evil.example/cb " + REDIRECT_URI,
        )
        self.client_id = legacy.client_id
        for browser in (self.browser, Client()):
            with self.subTest(signed_in=browser is self.browser):
                page = self.authorize("http://evil.example/cb", browser=browser)
                self.assertEqual(page.status_code, 400, page.get("Location"))
                self.assertIn("plain http", page.content.decode())
        self.assertEqual(self.authorize(REDIRECT_URI).status_code, 200)  # its good one still serves


class DotSeamsTest(SimpleTestCase):
    """The DOT names common.internals registers for the rule are still there, and in place."""

    def test_dots_application_asks_the_rule_and_dots_own_match_is_still_there(self) -> None:
        import inspect

        from oauth2_provider.http import OAuth2ResponseRedirect
        from oauth2_provider.models import AbstractApplication

        from authserver.clients import redirect_uris

        self.assertIs(Application.get_allowed_schemes, redirect_uris.dot_allowed_schemes)
        self.assertIs(Application.redirect_uri_allowed, redirect_uris.dot_redirect_uri_allowed)
        for method, parameters in [
            (AbstractApplication.redirect_uri_allowed, ["self", "uri"]),
            (AbstractApplication.get_allowed_schemes, ["self"]),
            (OAuth2ResponseRedirect.__init__, ["self", "redirect_to", "allowed_schemes", "args", "kwargs"]),
        ]:
            with self.subTest(method.__qualname__):
                self.assertEqual(list(inspect.signature(method).parameters), parameters)


class TheRuleNeverFailsTest(SimpleTestCase):
    @examples(max_examples=500, deadline=None)
    @given(
        uri=st.text(alphabet=st.characters(codec=None), max_size=40)
        | st.builds("{}:{}".format, st.sampled_from(["http", "https", "cursor", "x"]), st.text(max_size=40))
        | st.none()
        | st.integers()
        | st.lists(st.text(max_size=5), max_size=2),
        public_client=st.booleans(),
    )
    def test_it_accepts_or_refuses_in_words_whatever_it_is_given(self, uri, public_client) -> None:
        from authserver.clients.redirect_uris import RedirectURIRefused, redirect_uri_check

        try:
            redirect_uri_check(uri, public=public_client)
        except RedirectURIRefused as refused:
            self.assertTrue(refused.problem.startswith("it "), refused.problem)
            self.assertTrue(refused.fix)


class DotAgreesWithTheRuleTest(HypothesisTestCase):
    """django-oauth-toolkit's own check of an application (its model's clean, which the
    registration view and the admin run) accepts an application exactly when the rule accepts
    each of its redirect URIs."""

    @examples(max_examples=300, deadline=None)
    @given(
        uris=st.lists(
            st.sampled_from([uri for uri, _ in REFUSED_FOR_EVERY_CLIENT + REFUSED_FOR_A_CONFIDENTIAL_CLIENT])
            | st.sampled_from(ACCEPTED_FOR_A_PUBLIC_CLIENT)
            | st.builds(
                "{}{}{}{}".format,
                st.sampled_from(["https:", "http:", "cursor:", "x-y.z+1:", "javascript:", "HTTP:", ""]),
                st.sampled_from(["//", "/", ""]),
                st.sampled_from(["127.0.0.1", "localhost", "[::1]", "example.org", "a.b-c", "", "*.x.org", "u@h"]),
                st.sampled_from(["", ":8080", ":0", ":", "/cb", "/cb?x=1", "/cb#f", "/a b", "/\x00", "?q"]),
            ),
            min_size=1,
            max_size=3,
        ),
        public_client=st.booleans(),
    )
    def test_dot_accepts_an_application_exactly_when_the_rule_accepts_each_uri(self, uris, public_client) -> None:
        from django.core.exceptions import ValidationError

        from authserver.clients.redirect_uris import RedirectURIRefused, redirect_uri_check

        def accepted(uri: str) -> bool:
            try:
                redirect_uri_check(uri, public=public_client)
            except RedirectURIRefused:
                return False
            return True

        if any(not uri or any(character.isspace() for character in uri) for uri in uris):
            return  # DOT keeps the URIs in one space-separated column: the rule refuses white space first
        application = Application(
            name="Agent",
            client_type=Application.CLIENT_PUBLIC if public_client else Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=" ".join(uris),
        )
        try:
            application.full_clean(exclude=["client_secret"], validate_unique=False)
            dot_accepts = True
        except ValidationError:
            dot_accepts = False
        self.assertEqual(dot_accepts, all(accepted(uri) for uri in uris), uris)
