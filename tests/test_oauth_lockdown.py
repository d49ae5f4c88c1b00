"""The OAuth surface is exactly what the metadata advertises (contract 8): only the
authorization-code and refresh-token grants (and client credentials for people's headless
agents only, tests/test_headless_agents.py), no application-management pages, a
request checked before anyone is asked to sign in, and deactivation revokes."""

import datetime as dt

import httpx2
from oauth2_provider.models import get_access_token_model, get_application_model

from authserver.core.tokens import mint_access_token
from tests.oauth_helpers import REDIRECT_URI, authorization_url, pkce_pair, query_of, register_client
from tests.test_oauth_server import OAuthServerTestCase


class GrantLockdownTest(OAuthServerTestCase):
    def test_dot_management_pages_are_gone_even_when_signed_in(self) -> None:
        self.browser.open_authorization(self.authorization_url()[0])  # signs alice in
        for path in (
            "/o/applications/",
            "/o/applications/register/",
            "/o/applications/1/",
            "/o/authorized_tokens/",
            "/o/device-authorization/",
            "/o/device/",
            "/o/userinfo/",
        ):
            with self.subTest(path=path):
                self.assertEqual(self.browser.http.get(self.base + path).status_code, 404)

    def test_a_client_credentials_application_that_is_no_headless_agent_gets_no_token(self) -> None:
        tokens_before = get_access_token_model().objects.count()  # setUp's registration token
        Application = get_application_model()
        secret = "s" * 40
        application = Application.objects.create(
            name="made elsewhere",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
            client_secret=secret,
            user=self.alice,
        )
        response = httpx2.post(
            self.base + "/o/token/",
            data={"grant_type": "client_credentials", "scope": "notes:read"},
            auth=(application.client_id, secret),
        )
        # Authenticated, but client_credentials is served only to a person's headless agent.
        self.assertEqual(response.status_code, 400, response.text)
        self.assertEqual(response.json()["error"], "unauthorized_client")
        self.assertEqual(get_access_token_model().objects.count(), tokens_before)

    def test_client_credentials_for_a_public_client_is_refused(self) -> None:
        tokens_before = get_access_token_model().objects.count()
        response = httpx2.post(
            self.base + "/o/token/", data={"grant_type": "client_credentials", "client_id": self.client_id}
        )
        # A public client cannot authenticate, which the grant requires (RFC 6749 §4.4).
        self.assertEqual(response.status_code, 401, response.text)
        self.assertEqual(response.json()["error"], "invalid_client")
        self.assertEqual(get_access_token_model().objects.count(), tokens_before)

    def test_other_grants_are_refused_at_the_token_endpoint(self) -> None:
        tokens_before = get_access_token_model().objects.count()
        for grant_type in ("password", "urn:ietf:params:oauth:grant-type:device_code", "x"):
            with self.subTest(grant_type=grant_type):
                response = httpx2.post(
                    self.base + "/o/token/",
                    data={
                        "grant_type": grant_type,
                        "client_id": self.client_id,
                        "username": "alice",
                        "password": "alice-password",
                    },
                )
                self.assertEqual(response.status_code, 400, response.text)
                self.assertEqual(response.json()["error"], "unsupported_grant_type")
        self.assertEqual(get_access_token_model().objects.count(), tokens_before)

    def test_registration_for_other_grants_is_refused(self) -> None:
        response = register_client(self.base, grant_types=["client_credentials"])
        self.assertEqual(response.status_code, 400, response.text)
        self.assertEqual(response.json()["error"], "invalid_client_metadata")

    def test_operator_tokens_are_still_minted_and_work(self) -> None:
        token = mint_access_token(user=self.alice, scopes=["notes:read"], lifetime=dt.timedelta(minutes=5))
        self.assertEqual(self.mcp_status(token), 200)

    def test_the_advertised_grants_still_work(self) -> None:
        tokens = self.tokens()
        self.assertEqual(self.mcp_status(tokens["access_token"]), 200)
        refreshed = httpx2.post(
            self.base + "/o/token/",
            data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": self.client_id},
        )
        self.assertEqual(refreshed.status_code, 200, refreshed.text)


class BeforeSignInTest(OAuthServerTestCase):
    """An anonymous browser: nothing asks it to sign in for a request that would fail."""

    def anonymous(self, client_id: str | None = None, **params: str) -> httpx2.Response:
        _, challenge = pkce_pair()
        params.setdefault("code_challenge", challenge)
        params.setdefault("code_challenge_method", "S256")
        return httpx2.get(authorization_url(self.base, client_id or self.client_id, **params))

    def test_a_valid_request_goes_to_sign_in(self) -> None:
        response = self.anonymous()
        self.assertEqual(response.status_code, 302)
        self.assertIn("/accounts/login/?next=", response.headers["location"])

    def test_an_unknown_client_gets_an_error_page_not_a_redirect(self) -> None:
        response = self.anonymous("no-such-client")
        self.assertEqual(response.status_code, 400)
        self.assertNotIn("location", response.headers)
        self.assertIn("Invalid client_id", response.text)

    def test_a_bad_redirect_uri_gets_an_error_page_not_a_redirect(self) -> None:
        for redirect_uri in ("https://attacker.example/cb", "not a uri", REDIRECT_URI + "/x"):
            with self.subTest(redirect_uri=redirect_uri):
                response = self.anonymous(redirect_uri=redirect_uri)
                self.assertEqual(response.status_code, 400)
                self.assertNotIn("location", response.headers)

    def test_a_missing_challenge_or_plain_method_or_foreign_resource_redirects_with_error_and_iss(self) -> None:
        cases = [
            ({"code_challenge": "", "code_challenge_method": ""}, "invalid_request"),
            ({"code_challenge": "a" * 43, "code_challenge_method": "plain"}, "invalid_request"),
            ({"resource": "https://other.example/mcp"}, "invalid_target"),
            ({"response_type": "token"}, "unauthorized_client"),
        ]
        for params, error in cases:
            with self.subTest(params=params):
                response = self.anonymous(**params)
                self.assertEqual(response.status_code, 302, response.text[:300])
                location = response.headers["location"]
                self.assertTrue(location.startswith(REDIRECT_URI), location)
                redirect = query_of(location)
                self.assertEqual((redirect["error"], redirect["iss"], redirect["state"]), (error, self.issuer, "st-1"))

    def test_an_unreachable_metadata_document_client_is_refused_before_sign_in(self) -> None:
        response = self.anonymous("https://client.invalid/agent.json")
        self.assertEqual(response.status_code, 400)
        self.assertNotIn("/accounts/login/", response.headers.get("location", ""))


class DeactivationTest(OAuthServerTestCase):
    def test_deactivation_revokes_tokens_so_reactivation_does_not_revive_them(self) -> None:
        tokens = self.tokens()
        minted = mint_access_token(user=self.alice, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        self.assertEqual(self.mcp_status(tokens["access_token"]), 200)
        self.alice.is_active = False
        self.alice.save()
        self.alice.is_active = True
        self.alice.save()
        self.assertEqual(self.mcp_status(tokens["access_token"]), 401)
        self.assertEqual(self.mcp_status(minted), 401)
        refreshed = httpx2.post(
            self.base + "/o/token/",
            data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": self.client_id},
        )
        self.assertEqual(refreshed.status_code, 400)
