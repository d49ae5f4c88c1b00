"""A provider's issuer is kept exactly as the operator writes it, as the provider publishes it:
with a trailing slash (Auth0's issuers end in "/") or without. Sign-in through allauth's
``openid_connect`` provider works with either form, against a real OpenID provider on loopback
(tests/oidc.py) whose discovery document and ID tokens carry the issuer in that form; the
discovery document is looked for where OpenID Connect Discovery §4 puts it (the issuer, less a
terminating "/", then ``/.well-known/openid-configuration``)."""

import httpx2
from allauth.socialaccount.models import SocialAccount
from django.test import TestCase, override_settings

from authserver.core.sso_config import allauth_providers, discovery_url, parse_providers
from tests.oidc import OIDCProvider, sso_settings, through_provider_pages

CALLBACK = "http://testserver/accounts/oidc/acme/login/callback/"
CLIENT = {
    "client_id": "agent-codex",
    "client_secret": "agent-codex-test-secret",
    "redirect_uris": [CALLBACK],
    "grant_types": ["authorization_code"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "client_secret_post",
}


def provider_entry(issuer: str) -> dict:
    return {
        "id": "acme",
        "name": "Acme",
        "issuer": issuer,
        "client_id": CLIENT["client_id"],
        "secret": CLIENT["client_secret"],
        "domains": ["acme.test"],
    }


class IssuerAsWrittenTest(TestCase):
    def test_the_configuration_keeps_the_issuer_as_written_and_finds_its_discovery_document(self) -> None:
        for issuer, discovery in [
            ("https://idp.example", "https://idp.example/.well-known/openid-configuration"),
            ("https://tenant.auth0.example/", "https://tenant.auth0.example/.well-known/openid-configuration"),
            ("https://idp.example/realms/staff", "https://idp.example/realms/staff/.well-known/openid-configuration"),
            ("https://idp.example/realms/staff/", "https://idp.example/realms/staff/.well-known/openid-configuration"),
        ]:
            with self.subTest(issuer):
                [provider] = parse_providers(
                    f'[{{"id": "a", "issuer": "{issuer}", "client_id": "c", "secret": "s", "domains": ["*"]}}]'
                )
                self.assertEqual(provider["issuer"], issuer)
                self.assertEqual(discovery_url(issuer), discovery)
                [app] = allauth_providers([provider])["openid_connect"]["APPS"]
                self.assertEqual(app["settings"]["server_url"], discovery)


class SignInWithEitherIssuerFormTest(TestCase):
    def sign_in(self, provider: OIDCProvider, login: str) -> None:
        with override_settings(**sso_settings(provider_entry(provider.issuer))):
            # The sign-in page's button posts here; allauth reads the discovery document and
            # sends the browser to the provider.
            started = self.client.post("/accounts/oidc/acme/login/")
            self.assertEqual(started.status_code, 302, started.content[:500])
            with httpx2.Client(timeout=30) as browser:
                back = through_provider_pages(browser, started["Location"], login, until=CALLBACK)
            finished = self.client.get(back.removeprefix("http://testserver"))
        self.assertEqual(finished.status_code, 302, finished.content[:500])
        self.assertEqual(int(self.client.session["_auth_user_id"]), SocialAccount.objects.get(uid=login).user_id)

    def test_a_person_signs_in_through_a_provider_whose_issuer_has_no_trailing_slash(self) -> None:
        provider = OIDCProvider([CLIENT]).start()
        self.addCleanup(provider.stop)
        self.assertFalse(provider.issuer.endswith("/"))
        self.sign_in(provider, "ada@acme.test")

    def test_a_person_signs_in_through_a_provider_whose_issuer_ends_in_a_slash(self) -> None:
        provider = OIDCProvider([CLIENT], trailing_slash=True).start()
        self.addCleanup(provider.stop)
        published = httpx2.get(provider.issuer + ".well-known/openid-configuration").json()["issuer"]
        self.assertEqual(published, provider.issuer)
        self.assertTrue(published.endswith("/"))
        self.sign_in(provider, "bea@acme.test")
