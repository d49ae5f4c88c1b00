"""Consent, introspection, redirects and the other places an attacker pushes on the OAuth and
sign-in pages:

- ``approval_prompt=auto`` (or an application marked to skip it) never skips the consent page;
- introspection answers only the resource servers an operator provisioned, with their secret;
- a ``next`` leading off the site is never rendered nor followed;
- a client assertion's ``aud`` is one value, never a list naming other servers;
- the known-device cookie counts only for the very account that signed in, until its password
  changes or it is deleted;
- the consent page's form may lead only here and to the client's redirect origin;
- the server refuses to start with loopback documents allowed and debug off.
"""

import base64
import datetime as dt
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

from allauth.account.adapter import get_adapter as get_account_adapter
from allauth.core import context as allauth_context
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory, SimpleTestCase, TestCase, override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import settings as settings_for_hypothesis
from hypothesis import strategies as st
from oauth2_provider.models import get_application_model

from authserver.core.tokens import mint_access_token
from authserver.models import ClientKeys
from authserver.people.devices import COOKIE
from common.redirects import safe_next
from tests.clocks import SignInClock
from tests.hosted_clients import ASSERTION_TYPE, ChatGPTLike, DocumentsServer
from tests.oauth_helpers import REDIRECT_URI, forms_of, pkce_pair, query_of

Application = get_application_model()
ROOT = Path(__file__).resolve().parent.parent


def csp_directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


class ConsentAlwaysAskedTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.browser = Client()
        self.browser.force_login(self.alice)
        self.application = Application.objects.create(
            name="Agent",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
        )

    def authorize(self, **extra: str):
        verifier, challenge = pkce_pair()
        query = {
            "response_type": "code",
            "client_id": self.application.client_id,
            "redirect_uri": REDIRECT_URI,
            "scope": "notes:read notes:write",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            **extra,
        }
        return self.browser.get("/o/authorize/", query), verifier

    def approve(self) -> None:
        page, verifier = self.authorize()
        fields = next(form for form in forms_of(page.content.decode()) if "client_id" in form["fields"])["fields"]
        redirect = self.browser.post("/o/authorize/", {**fields, "allow": "Authorize"})
        code = query_of(redirect["Location"])["code"]
        token = Client().post(
            "/o/token/",
            {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": REDIRECT_URI,
                "client_id": self.application.client_id,
                "code_verifier": verifier,
            },
        )
        self.assertEqual(token.status_code, 200, token.content)

    def assert_consent_page(self, page) -> None:
        self.assertEqual(page.status_code, 200, page.get("Location"))
        self.assertIn(b"Allow", page.content)

    def test_a_second_authorization_with_approval_prompt_auto_still_asks(self) -> None:
        self.approve()  # the client now holds a live token of alice's
        page, _ = self.authorize(approval_prompt="auto")
        self.assert_consent_page(page)

    def test_an_application_marked_to_skip_consent_is_still_asked_for(self) -> None:
        self.application.skip_authorization = True
        self.application.save()  # as the admin's form saves it
        page, _ = self.authorize()
        self.assert_consent_page(page)

    def test_the_consent_forms_policy_names_this_server_and_the_redirect_origin_only(self) -> None:
        page, _ = self.authorize()
        self.assertEqual(csp_directives(page)["form-action"], ["'self'", "http://127.0.0.1:9"])


class RedirectSourceTest(SimpleTestCase):
    def test_each_redirect_uri_becomes_a_source_that_cannot_break_the_policy(self) -> None:
        from authserver.oauth.views import redirect_source

        for uri, source in {
            "http://127.0.0.1:9/callback": "http://127.0.0.1:9",
            "https://Claude.AI/api/mcp/auth_callback": "https://claude.ai",
            "http://[::1]:33418/cb": "http://[::1]:33418",
            "cursor://anysphere.cursor-retrieval/oauth/callback": "cursor:",
            "https://evil.example;script-src *": None,
            "http://a b/": None,
            "1http://x/": None,
            "http://x:99999/": None,
        }.items():
            with self.subTest(uri):
                self.assertEqual(redirect_source(uri), source)


class IntrospectionByStrangersTest(TestCase):
    def setUp(self) -> None:
        alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.token = mint_access_token(user=alice, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))

    def introspect(self, client_id: str, secret: str, **extra):
        credentials = base64.b64encode(f"{client_id}:{secret}".encode()).decode()
        return Client().post(
            "/o/introspect/", {"token": self.token, **extra}, HTTP_AUTHORIZATION=f"Basic {credentials}"
        )

    def assert_refused(self, answer) -> None:
        self.assertEqual(answer.status_code, 401, answer.content)
        self.assertNotIn(b"active", answer.content)
        self.assertNotIn(b"alice", answer.content)

    def test_a_client_registered_a_moment_ago_learns_nothing(self) -> None:
        registered = (
            Client()
            .post(
                "/o/register/",
                {"redirect_uris": [REDIRECT_URI], "token_endpoint_auth_method": "client_secret_basic"},
                content_type="application/json",
            )
            .json()
        )
        self.assert_refused(self.introspect(registered["client_id"], registered["client_secret"]))
        self.assert_refused(
            Client().post(
                "/o/introspect/",
                {
                    "token": self.token,
                    "client_id": registered["client_id"],
                    "client_secret": registered["client_secret"],
                },
            )
        )

    @override_settings(CODEX_INTROSPECTION_CLIENTS=["resource-server"])
    def test_only_a_provisioned_resource_server_with_its_secret_may(self) -> None:
        Application.objects.create(
            client_id="resource-server",
            client_secret="resource-server-secret",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        )
        self.assert_refused(self.introspect("resource-server", "a-guess"))
        credentials = base64.b64encode(b"resource-server:resource-server-secret").decode()
        in_the_url = Client().get("/o/introspect/", {"token": self.token}, HTTP_AUTHORIZATION=f"Basic {credentials}")
        self.assertEqual(in_the_url.status_code, 405)  # a token in a URL ends up in logs
        answer = self.introspect("resource-server", "resource-server-secret")
        self.assertEqual(answer.status_code, 200, answer.content)
        self.assertTrue(answer.json()["active"])

    def test_a_client_assertion_is_not_a_way_in(self) -> None:
        documents = self.enterContext(DocumentsServer())
        chatgpt = ChatGPTLike(documents)
        known_private_key_jwt_client(chatgpt)
        with override_settings(CODEX_INTROSPECTION_CLIENTS=[chatgpt.client_id]):
            answer = Client().post(
                "/o/introspect/",
                {
                    "token": self.token,
                    "client_id": chatgpt.client_id,
                    "client_assertion_type": ASSERTION_TYPE,
                    "client_assertion": chatgpt.assertion(settings.CODEX_ISSUER_URL + "/introspect/"),
                },
            )
        self.assert_refused(answer)


def known_private_key_jwt_client(chatgpt: ChatGPTLike) -> None:
    Application.objects.create(
        client_id=chatgpt.client_id,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
        registration_source=Application.RegistrationSource.CIMD,
        cimd_expires_at=timezone.now() + dt.timedelta(days=1),
    )
    ClientKeys.objects.create(client_id=chatgpt.client_id, jwks_uri=chatgpt.jwks_uri, signing_algorithm="RS256")


class AssertionAudienceTest(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())
        cls.chatgpt = ChatGPTLike(cls.documents)

    def setUp(self) -> None:
        known_private_key_jwt_client(self.chatgpt)

    def token_request(self, audience):
        return Client().post(
            "/o/token/",
            {
                "grant_type": "authorization_code",
                "code": "c",
                "redirect_uri": REDIRECT_URI,
                "client_id": self.chatgpt.client_id,
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": self.chatgpt.assertion(audience, jti=str(uuid.uuid4())),
            },
        )

    def test_aud_is_one_value_never_a_list_with_strangers(self) -> None:
        issuer = settings.CODEX_ISSUER_URL
        for audience in (
            [issuer, "https://stranger.example/token"],
            ["https://stranger.example", issuer],
            [issuer, issuer],
        ):
            with self.subTest(audience=audience):
                answer = self.token_request(audience)
                self.assertEqual(answer.status_code, 401, answer.content)
                self.assertIn("aud must be one value", answer.json()["error_description"])
        for audience in (issuer, [issuer], issuer + "/token/"):
            with self.subTest(audience=audience):
                answer = self.token_request(audience)
                self.assertEqual(answer.json()["error"], "invalid_grant", answer.content)  # authenticated


class UnsafeNextTest(TestCase):
    ELSEWHERE = [
        "https://elsewhere.example/",
        "//elsewhere.example/",
        "javascript:alert(1)",
        "http:\\\\elsewhere.example",
    ]

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")

    def test_the_signed_in_sign_in_page_never_links_off_the_site(self) -> None:
        browser = Client()
        browser.force_login(self.alice)
        for target in self.ELSEWHERE:
            with self.subTest(target):
                page = browser.get("/accounts/login/", {"next": target}).content.decode()
                self.assertNotIn("elsewhere.example", page)
                self.assertNotIn("javascript:", page)
        page = browser.get("/accounts/login/", {"next": "/codex/?q=x"}).content.decode()
        self.assertIn('<a href="/codex/?q=x">Continue</a>', page)

    def test_no_page_renders_a_next_off_the_site_and_no_sign_in_follows_one(self) -> None:
        browser = Client()
        browser.force_login(self.alice)
        for path in ("/accounts/reauthenticate/", "/accounts/logout/", "/accounts/password/change/"):
            for target in self.ELSEWHERE:
                with self.subTest(path=path, target=target):
                    page = browser.get(path, {"next": target}).content.decode()
                    self.assertNotIn("elsewhere.example", page)
                    self.assertNotIn("javascript:", page)
        for target in self.ELSEWHERE:
            with self.subTest(sign_in=target):
                answer = Client().post(
                    "/accounts/login/?" + f"next={target}",
                    {"login": "alice", "password": "alice-password", "next": target},
                )
                self.assertEqual(answer.status_code, 302)
                self.assertNotIn("elsewhere.example", answer["Location"])
                self.assertFalse(answer["Location"].startswith("javascript:"))

    def test_a_posted_next_to_another_name_of_this_machine_is_not_followed(self) -> None:
        # ALLOWED_HOSTS lists 127.0.0.1, localhost and [::1]; the request's host is one of them.
        # A next is this site's only on the request's own host (another name reaches another
        # port's server, or a browser's other cookies), whichever door reads it.
        for target in ("http://localhost/x", "http://[::1]/x", "http://127.0.0.1/x", "//localhost/x"):
            with self.subTest(target=target):
                answer = Client(HTTP_HOST="127.0.0.1:8000").post(
                    "/accounts/login/", {"login": "alice", "password": "alice-password", "next": target}
                )
                self.assertEqual(answer.status_code, 302)
                self.assertEqual(answer["Location"], settings.LOGIN_REDIRECT_URL)


class OneNextRuleTest(SimpleTestCase):
    """The query's next (codex_site.middleware) and every next allauth follows (its adapter's
    is_safe_url) are judged by one function: no URL passes one door and not the other."""

    HOSTS = ("127.0.0.1:8000", "localhost", "[::1]:8000", "testserver")

    @given(
        url=st.one_of(
            st.text(max_size=40),
            st.builds(
                "{}{}{}".format,
                st.sampled_from(["", "http:", "https:", "//", "http://", "https://", "javascript:", "/\\\\", "///"]),
                st.sampled_from(
                    [
                        "localhost",
                        "127.0.0.1",
                        "[::1]",
                        "127.0.0.1:8000",
                        "[::1]:8000",
                        "testserver",
                        "evil.example",
                        "localhost:8000",
                        "",
                    ]
                ),
                st.sampled_from(["", "/", "/x", "/codex/?q=1", "@evil.example/"]),
            ),
        ),
        host=st.sampled_from(HOSTS),
        secure=st.booleans(),
    )
    @settings_for_hypothesis(max_examples=300, deadline=None)
    def test_the_middleware_and_allauth_agree_on_every_next(self, url: str, host: str, secure: bool) -> None:
        request = RequestFactory().get("/", HTTP_HOST=host, secure=secure)
        with allauth_context.request_context(request):
            followed = get_account_adapter(request).is_safe_url(url)
        self.assertEqual(followed, safe_next(request, url), (url, host, secure))


class KnownDeviceCookieTest(TestCase):
    """The cookie counts a browser apart from an attacker's guesses only for the account it was
    given by, as its password stands."""

    def setUp(self) -> None:
        clock = SignInClock()
        patcher = clock.patch()
        patcher.start()
        self.addCleanup(patcher.stop)
        self.users = get_user_model().objects
        self.victim = self.users.create_user("victim", password="victim-password")
        self.own_browser = Client(REMOTE_ADDR="203.0.113.40")
        self.assertEqual(self.sign_in(self.own_browser, "victim-password").status_code, 302)
        self.assertIn(COOKIE, self.own_browser.cookies)
        self.own_browser.post("/accounts/logout/")  # signed out; the browser keeps its device cookie

    def sign_in(self, browser: Client, password: str):
        return browser.post("/accounts/login/", {"login": "victim", "password": password})

    def guess_until_throttled(self) -> None:
        attacker = Client(REMOTE_ADDR="203.0.113.41")
        for guess in range(6):
            self.sign_in(attacker, f"guess-{guess}")
        self.assertIn(
            "try again in", self.sign_in(Client(REMOTE_ADDR="203.0.113.42"), "victim-password").content.decode()
        )

    def test_it_lets_its_own_browser_past_the_guesses(self) -> None:
        self.guess_until_throttled()
        self.assertEqual(self.sign_in(self.own_browser, "victim-password").status_code, 302)

    def test_it_dies_with_a_password_change(self) -> None:
        self.victim.set_password("a-new-password")
        self.victim.save()
        self.guess_until_throttled()
        answer = self.sign_in(self.own_browser, "a-new-password")
        self.assertNotEqual(answer.status_code, 302, "the cookie outlived the password it was given under")
        self.assertIn("try again in", answer.content.decode())

    def test_it_dies_with_the_account(self) -> None:
        self.victim.delete()
        self.users.create_user("victim", password="victim-password")  # someone else, by the same name
        self.guess_until_throttled()
        answer = self.sign_in(self.own_browser, "victim-password")
        self.assertNotEqual(answer.status_code, 302, "the cookie counted for a later account of the same name")


class LoopbackDocumentsOutsideDebugTest(SimpleTestCase):
    def run_python(self, code: str, **env: str) -> subprocess.CompletedProcess:
        environment = {key: value for key, value in os.environ.items() if key not in {"DJANGO_DEBUG", "SECRET_KEY"}}
        environment.update(SECRET_KEY="s" * 50, **env)
        return subprocess.run(
            [sys.executable, *code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
        )

    def test_the_server_refuses_to_start_with_loopback_documents_and_debug_off(self) -> None:
        for command in (["manage.py", "check"], ["-c", "import codex_site.asgi"]):
            with self.subTest(command[-1]):
                result = self.run_python(command, DJANGO_DEBUG="0", CODEX_CIMD_ALLOW_LOOPBACK="1")
                self.assertEqual(result.returncode, 1, result.stderr)
                self.assertIn(
                    "refuses to start: CODEX_CIMD_ALLOW_LOOPBACK is on while DJANGO_DEBUG is off", result.stderr
                )
                self.assertNotIn("Traceback", result.stderr)

    def test_in_debug_it_starts(self) -> None:
        result = self.run_python(["manage.py", "check"], DJANGO_DEBUG="1", CODEX_CIMD_ALLOW_LOOPBACK="1")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(re.search("no issues", result.stdout + result.stderr), result.stdout)
