"""The authorization server over real HTTP: metadata, consent, and every refusal the issue lists."""

import datetime as dt
import re

import httpx2
from django.core.cache import cache
from django.test import override_settings
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model

from codex_site.settings import oauth2_provider_settings
from mcp_endpoint.auth import token_checksum
from tests.clocks import one_rate_window
from tests.http_client import call_tool
from tests.live import LiveServerTestCase
from tests.oauth_helpers import (
    REDIRECT_URI,
    Browser,
    authorization_url,
    exchange_code,
    forms_of,
    pkce_pair,
    query_of,
    refresh,
    register_client,
)
from tests.sdk_oauth import LoopbackMetadataServer

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()


class OAuthServerTestCase(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.base = self.live.base_url
        self.issuer = self.base + "/o"
        self.client_id = register_client(self.base).json()["client_id"]
        self.browser = Browser(self.base, "alice", "alice-password")
        self.addCleanup(self.browser.close)

    def authorization_url(self, **params: str) -> tuple[str, str]:
        """An authorization URL with S256 PKCE and both scopes unless ``params`` say otherwise."""
        verifier, challenge = pkce_pair()
        params.setdefault("code_challenge", challenge)
        params.setdefault("code_challenge_method", "S256")
        params.setdefault("scope", "notes:read notes:write")
        return authorization_url(self.base, self.client_id, **params), verifier

    def open_authorization(self, **params: str) -> httpx2.Response:
        """Signed in, open the authorization URL: the consent page, or a redirect refusing it."""
        return self.browser.open_authorization(self.authorization_url(**params)[0])

    def authorize(self, *, allow: bool = True, **params: str) -> dict[str, str]:
        url, verifier = self.authorization_url(**params)
        redirect = self.browser.authorize(url, allow=allow)
        redirect["verifier"] = verifier
        return redirect

    def tokens(self, **params: str) -> dict:
        redirect = self.authorize(**params)
        response = exchange_code(self.base, self.client_id, redirect["code"], redirect["verifier"])
        self.assertEqual(response.status_code, 200, response.text)
        return response.json()

    def mcp_status(self, access_token: str) -> int:
        return call_tool(self.mcp_url, access_token, "field_notes_search", {}).status_code


class MetadataTest(OAuthServerTestCase):
    def test_authorization_server_metadata_has_exactly_these_members(self) -> None:
        documents = [
            httpx2.get(self.base + path).json()
            for path in [
                "/.well-known/oauth-authorization-server/o",
                "/.well-known/oauth-authorization-server",
                "/o/.well-known/oauth-authorization-server",
            ]
        ]
        self.assertEqual(documents[0], documents[1])
        self.assertEqual(documents[0], documents[2])
        o = self.issuer
        secret_methods = ["none", "client_secret_basic", "client_secret_post"]
        self.assertEqual(
            documents[0],
            {
                "issuer": o,
                "authorization_endpoint": o + "/authorize/",
                "token_endpoint": o + "/token/",
                "revocation_endpoint": o + "/revoke_token/",
                "registration_endpoint": o + "/register/",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
                "scopes_supported": ["notes:read", "notes:write"],
                "code_challenge_methods_supported": ["S256"],
                "client_id_metadata_document_supported": True,
                "authorization_response_iss_parameter_supported": True,
                "token_endpoint_auth_methods_supported": [*secret_methods, "private_key_jwt"],
                "token_endpoint_auth_signing_alg_values_supported": [
                    "RS256",
                    "RS384",
                    "RS512",
                    "PS256",
                    "PS384",
                    "PS512",
                    "ES256",
                    "ES384",
                    "ES512",
                ],
                "revocation_endpoint_auth_methods_supported": [*secret_methods, "private_key_jwt"],
            },
        )

    @override_settings(CODEX_INTROSPECTION_CLIENTS=["resource-server"])
    def test_introspection_is_advertised_once_a_resource_server_is_provisioned(self) -> None:
        metadata = httpx2.get(self.base + "/.well-known/oauth-authorization-server/o").json()
        self.assertEqual(metadata["introspection_endpoint"], self.issuer + "/introspect/")
        self.assertEqual(
            metadata["introspection_endpoint_auth_methods_supported"], ["client_secret_basic", "client_secret_post"]
        )

    def test_the_issuer_is_byte_identical_to_the_resource_metadata(self) -> None:
        issuer = httpx2.get(self.base + "/.well-known/oauth-authorization-server/o").json()["issuer"]
        for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]:
            self.assertEqual(httpx2.get(self.base + path).json()["authorization_servers"], [issuer])

    def test_the_only_metadata_served_is_this_servers_resource_and_issuer(self) -> None:
        # RFC 9728 metadata names a resource this server accepts tokens for: /mcp, and nothing
        # under the issuer (a token asked for <base>/o or <base>/o/mcp is refused, invalid_target).
        # The issuer's metadata is not served under a path that would name another issuer.
        for path in [
            "/o/.well-known/oauth-protected-resource",
            "/o/.well-known/oauth-protected-resource/mcp",
            "/o/.well-known/oauth-authorization-server/o",  # an issuer <base>/o/.well-known/...: not this one
        ]:
            with self.subTest(path=path):
                response = httpx2.get(self.base + path)
                self.assertEqual(response.status_code, 404, response.text)
                self.assertEqual(response.json()["error"], "not_found")
        for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]:
            with self.subTest(path=path):
                self.assertEqual(httpx2.get(self.base + path).json()["resource"], self.base + "/mcp")

    def test_the_authorization_server_metadata_answers_where_clients_look_with_one_issuer(self) -> None:
        # RFC 8414's path-suffixed form and the root form (contract 8), and the issuer + well-known
        # form some clients try: each names the issuer <base>/o.
        for path in [
            "/.well-known/oauth-authorization-server/o",
            "/.well-known/oauth-authorization-server",
            "/o/.well-known/oauth-authorization-server",
        ]:
            with self.subTest(path=path):
                response = httpx2.get(self.base + path)
                self.assertEqual(response.status_code, 200, response.text)
                self.assertEqual(response.json()["issuer"], self.issuer)

    def test_openid_discovery_is_a_plain_404(self) -> None:
        for path in ["/.well-known/openid-configuration/o", "/o/.well-known/openid-configuration"]:
            response = httpx2.get(self.base + path)
            self.assertEqual(response.status_code, 404, path)


class ConsentTest(OAuthServerTestCase):
    def test_signing_in_is_required_before_consent(self) -> None:
        response = httpx2.get(
            authorization_url(self.base, self.client_id, code_challenge="x" * 43, code_challenge_method="S256")
        )
        self.assertEqual(response.status_code, 302)
        self.assertIn("/accounts/login/?next=", response.headers["location"])

    def test_the_consent_page_names_the_client_its_redirect_host_and_scopes_in_words(self) -> None:
        page = self.open_authorization(scope="notes:read notes:write")
        self.assertEqual(page.status_code, 200)
        self.assertIn('<html lang="en">', page.text)
        self.assertIn("Test agent", page.text)
        self.assertIn("127.0.0.1", page.text)
        self.assertIn("Read your notes", page.text)
        self.assertIn("Write your notes", page.text)
        self.assertIn("runs on your own computer", page.text)

    def test_the_consent_form_is_csrf_protected(self) -> None:
        page = self.open_authorization()
        form = next(f for f in forms_of(page.text) if "client_id" in f["fields"])
        fields = {k: v for k, v in form["fields"].items() if k != "csrfmiddlewaretoken"}
        fields["allow"] = "Authorize"
        self.browser.http.cookies.delete("csrftoken")
        response = self.browser.http.post(str(page.url), data=fields)
        self.assertEqual(response.status_code, 403)
        self.assertFalse(AccessToken.objects.filter(user=self.alice).exists())

    def test_deny_returns_access_denied_with_state_and_iss(self) -> None:
        redirect = self.authorize(allow=False)
        self.assertEqual(redirect["error"], "access_denied")
        self.assertEqual(redirect["state"], "st-1")
        self.assertEqual(redirect["iss"], self.issuer)

    def test_success_carries_iss_and_a_missing_resource_is_pinned_to_mcp(self) -> None:
        redirect = self.authorize()
        self.assertEqual(redirect["iss"], self.issuer)
        tokens = exchange_code(self.base, self.client_id, redirect["code"], redirect["verifier"]).json()
        stored = AccessToken.objects.get(token_checksum=token_checksum(tokens["access_token"]))
        self.assertEqual(stored.resource, [self.mcp_url])
        self.assertEqual(self.mcp_status(tokens["access_token"]), 200)

    def test_the_person_sees_and_revokes_connected_clients(self) -> None:
        tokens = self.tokens()
        page = self.browser.http.get(self.base + "/account/clients/")
        self.assertIn("Test agent", page.text)
        self.assertIn("Read your notes, Write your notes", page.text)
        # Revoking asks first: the list links to a page whose form revokes.
        link = re.search(r'href="(/account/clients/\d+/revoke/)"', page.text).group(1)
        asked = self.browser.http.get(self.base + link)
        self.assertEqual(self.mcp_status(tokens["access_token"]), 200)  # asking revoked nothing
        form = next(f for f in forms_of(asked.text) if f["action"] == link)
        response = self.browser.http.post(self.base + form["action"], data=form["fields"])
        self.assertEqual(response.status_code, 302)
        self.assertEqual(self.mcp_status(tokens["access_token"]), 401)
        self.assertEqual(refresh(self.base, self.client_id, tokens["refresh_token"]).status_code, 400)
        self.assertNotIn("Test agent", self.browser.http.get(self.base + "/account/clients/").text)


class RefusalTest(OAuthServerTestCase):
    def test_a_missing_or_wrong_pkce_verifier_is_refused(self) -> None:
        for verifier in [None, pkce_pair()[0]]:
            with self.subTest(verifier=verifier):
                redirect = self.authorize()
                response = exchange_code(self.base, self.client_id, redirect["code"], verifier)
                self.assertEqual(response.status_code, 400, response.text)
                self.assertIn(response.json()["error"], {"invalid_request", "invalid_grant"})

    def test_a_missing_code_challenge_is_refused(self) -> None:
        response = self.browser.open_authorization(authorization_url(self.base, self.client_id, scope="notes:read"))
        # (built by hand: the helper would add a code_challenge)
        self.assertEqual(response.status_code, 302)
        redirect = query_of(response.headers["location"])
        self.assertEqual(redirect["error"], "invalid_request")
        self.assertEqual(redirect["iss"], self.issuer)

    def test_the_plain_method_is_refused_before_consent(self) -> None:
        response = self.open_authorization(code_challenge="a" * 43, code_challenge_method="plain")
        self.assertEqual(response.status_code, 302)
        redirect = query_of(response.headers["location"])
        self.assertEqual((redirect["error"], redirect["iss"]), ("invalid_request", self.issuer))
        self.assertIn("S256", redirect["error_description"])

    def test_a_mismatched_redirect_uri_is_refused(self) -> None:
        response = self.open_authorization(redirect_uri="https://attacker.example/cb")
        self.assertEqual(response.status_code, 400)  # shown to the person, never redirected
        self.assertNotIn("attacker.example", response.headers.get("location", ""))
        redirect = self.authorize()
        exchanged = exchange_code(
            self.base, self.client_id, redirect["code"], redirect["verifier"], redirect_uri="http://127.0.0.1:9/other"
        )
        self.assertEqual(exchanged.status_code, 400)

    def test_a_foreign_resource_is_refused_with_invalid_target(self) -> None:
        response = self.open_authorization(resource="https://other.example/mcp")
        self.assertEqual(response.status_code, 302)  # refused before the consent page
        redirect = query_of(response.headers["location"])
        self.assertEqual(
            (redirect["error"], redirect["iss"], redirect["state"]), ("invalid_target", self.issuer, "st-1")
        )
        redirect = self.authorize(resource=self.mcp_url)
        response = exchange_code(
            self.base, self.client_id, redirect["code"], redirect["verifier"], resource="https://other.example/mcp"
        )
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["error"], "invalid_target")

    def test_a_reused_authorization_code_is_refused(self) -> None:
        redirect = self.authorize()
        first = exchange_code(self.base, self.client_id, redirect["code"], redirect["verifier"])
        self.assertEqual(first.status_code, 200)
        second = exchange_code(self.base, self.client_id, redirect["code"], redirect["verifier"])
        self.assertEqual(second.status_code, 400)
        self.assertEqual(second.json()["error"], "invalid_grant")

    def test_replaying_a_rotated_refresh_token_revokes_the_family(self) -> None:
        first = self.tokens()
        rotated = refresh(self.base, self.client_id, first["refresh_token"])
        self.assertEqual(rotated.status_code, 200, rotated.text)
        second = rotated.json()
        self.assertNotEqual(second["refresh_token"], first["refresh_token"])
        self.assertEqual(self.mcp_status(second["access_token"]), 200)
        self.assertEqual(
            AccessToken.objects.get(token_checksum=token_checksum(second["access_token"])).resource, [self.mcp_url]
        )

        replay = refresh(self.base, self.client_id, first["refresh_token"])
        self.assertEqual(replay.status_code, 400)
        self.assertEqual(replay.json()["error"], "invalid_grant")
        # The whole family is gone: the newest refresh token and its access token too.
        self.assertEqual(refresh(self.base, self.client_id, second["refresh_token"]).status_code, 400)
        self.assertEqual(self.mcp_status(second["access_token"]), 401)

    def test_a_revoked_access_token_gets_401_on_the_next_mcp_call(self) -> None:
        tokens = self.tokens()
        self.assertEqual(self.mcp_status(tokens["access_token"]), 200)
        response = httpx2.post(
            self.base + "/o/revoke_token/", data={"token": tokens["access_token"], "client_id": self.client_id}
        )
        self.assertEqual(response.status_code, 200)
        self.assertEqual(self.mcp_status(tokens["access_token"]), 401)

    def test_an_expired_token_gets_401(self) -> None:
        tokens = self.tokens()
        AccessToken.objects.filter(token_checksum=token_checksum(tokens["access_token"])).update(
            expires=dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
        )
        self.assertEqual(self.mcp_status(tokens["access_token"]), 401)

    def test_a_token_of_another_resource_and_a_registration_token_get_401(self) -> None:
        tokens = self.tokens()
        AccessToken.objects.filter(token_checksum=token_checksum(tokens["access_token"])).update(
            resource=["https://other.example/mcp"]
        )
        self.assertEqual(self.mcp_status(tokens["access_token"]), 401)
        registration_token = register_client(self.base).json()["registration_access_token"]
        self.assertEqual(self.mcp_status(registration_token), 401)

    def test_access_tokens_last_about_an_hour(self) -> None:
        tokens = self.tokens()
        self.assertEqual(tokens["expires_in"], 3600)
        self.assertEqual(tokens["token_type"], "Bearer")


class EmptyScopeTest(OAuthServerTestCase):
    """An empty scope parameter is an absent one (RFC 6749 §3.3 leaves the default to the
    server): ChatGPT has been reported sending ``scope=`` with no value."""

    def test_an_empty_scope_on_authorize_gets_the_default_scope(self) -> None:
        for empty in ("", " ", "  "):
            with self.subTest(scope=repr(empty)):
                self.assertEqual(self.tokens(scope=empty)["scope"], "notes:read")

    def test_the_consent_page_names_the_default_scope(self) -> None:
        page = self.open_authorization(scope="")
        self.assertEqual(page.status_code, 200, page.text)
        self.assertIn("Read your notes", page.text)
        self.assertNotIn("Write your notes", page.text)

    def test_doubled_spaces_between_scopes_are_one_separator(self) -> None:
        self.assertEqual(self.tokens(scope="notes:read  notes:write")["scope"], "notes:read notes:write")

    def test_an_empty_scope_on_the_token_and_refresh_requests_keeps_the_grant(self) -> None:
        redirect = self.authorize()
        issued = exchange_code(self.base, self.client_id, redirect["code"], redirect["verifier"], scope="")
        self.assertEqual(issued.status_code, 200, issued.text)
        self.assertEqual(issued.json()["scope"], "notes:read notes:write")
        refreshed = refresh(self.base, self.client_id, issued.json()["refresh_token"], scope="")
        self.assertEqual(refreshed.status_code, 200, refreshed.text)
        self.assertEqual(refreshed.json()["scope"], "notes:read notes:write")

    def test_a_scope_that_is_not_offered_is_still_refused(self) -> None:
        refused = self.open_authorization(scope="notes:admin")
        self.assertEqual(refused.status_code, 302)
        self.assertEqual(query_of(refused.headers["location"])["error"], "invalid_scope")


class RateLimitTest(OAuthServerTestCase):
    def setUp(self) -> None:
        cache.clear()  # start each test with fresh per-address counters
        # Every counted request in one window, from setUp's registration on.
        still = one_rate_window()
        still.start()
        self.addCleanup(still.stop)
        super().setUp()

    def test_dynamic_registration_is_rate_limited_with_a_clear_429(self) -> None:
        with override_settings(CODEX_DCR_RATE_LIMIT=3):
            responses = [register_client(self.base) for _ in range(3)]
        self.assertEqual([r.status_code for r in responses], [201, 201, 429])  # setUp registered one already
        refused = responses[-1]
        self.assertEqual(refused.json()["error"], "too_many_requests")
        self.assertGreater(int(refused.headers["retry-after"]), 0)

    def test_metadata_document_sign_ins_are_rate_limited(self) -> None:
        url = authorization_url(
            self.base, "https://client.invalid/agent.json", code_challenge="a" * 43, code_challenge_method="S256"
        )
        with override_settings(CODEX_CIMD_RATE_LIMIT=2):
            statuses = [self.browser.open_authorization(url).status_code for _ in range(3)]
        self.assertNotEqual(statuses[0], 429)
        self.assertEqual(statuses[-1], 429)


@override_settings(CODEX_INTROSPECTION_CLIENTS=["resource-server"])
class IntrospectionTest(OAuthServerTestCase):
    def test_a_resource_server_can_introspect_a_token_and_sees_its_audience(self) -> None:
        Application = get_application_model()
        Application.objects.create(
            name="Introspecting resource server",
            client_id="resource-server",
            client_secret="resource-server-secret",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
        )
        tokens = self.tokens()
        auth = ("resource-server", "resource-server-secret")
        active = httpx2.post(self.base + "/o/introspect/", data={"token": tokens["access_token"]}, auth=auth).json()
        self.assertTrue(active["active"])
        self.assertEqual(active["username"], "alice")
        self.assertEqual(set(active["scope"].split()), {"notes:read", "notes:write"})
        self.assertEqual(active["aud"], [self.mcp_url])
        unknown = httpx2.post(self.base + "/o/introspect/", data={"token": "no-such-token"}, auth=auth).json()
        self.assertEqual(unknown, {"active": False})

    def introspect(self, token: str) -> httpx2.Response:
        Application = get_application_model()
        Application.objects.get_or_create(
            client_id="resource-server",
            defaults={
                "name": "Introspecting resource server",
                "client_secret": "resource-server-secret",
                "client_type": Application.CLIENT_CONFIDENTIAL,
                "authorization_grant_type": Application.GRANT_CLIENT_CREDENTIALS,
            },
        )
        auth = ("resource-server", "resource-server-secret")
        return httpx2.post(self.base + "/o/introspect/", data={"token": token}, auth=auth)

    def test_a_token_the_mcp_endpoint_refuses_introspects_as_inactive(self) -> None:
        # One verdict on a token: the one /mcp gives (authserver.core.token_check). A person
        # deactivated by a bulk update (no signal: their tokens stay in the table) holds tokens
        # /mcp refuses; so is a token bound to another resource.
        tokens = self.tokens()
        self.assertTrue(self.introspect(tokens["access_token"]).json()["active"])
        type(self.alice).objects.filter(pk=self.alice.pk).update(is_active=False)
        self.assertEqual(self.mcp_status(tokens["access_token"]), 401)
        self.assertEqual(self.introspect(tokens["access_token"]).json(), {"active": False})
        type(self.alice).objects.filter(pk=self.alice.pk).update(is_active=True)
        get_access_token_model().objects.filter(token_checksum=token_checksum(tokens["access_token"])).update(
            resource=["https://elsewhere.example/mcp"]
        )
        self.assertEqual(self.mcp_status(tokens["access_token"]), 401)
        self.assertEqual(self.introspect(tokens["access_token"]).json(), {"active": False})

    def test_no_introspection_answer_is_stored_by_a_cache(self) -> None:
        tokens = self.tokens()
        for token in (tokens["access_token"], "no-such-token"):
            with self.subTest(active=token != "no-such-token"):
                answer = self.introspect(token)
                self.assertEqual(answer.status_code, 200)
                self.assertEqual(answer.headers["cache-control"], "no-store")


class MetadataDocumentAllowListTest(OAuthServerTestCase):
    def test_a_client_id_host_outside_the_allow_list_is_never_fetched(self) -> None:
        restricted = oauth2_provider_settings(self.base) | {"CIMD_ALLOWED_HOSTS": ["agents.example.com"]}
        with LoopbackMetadataServer() as metadata, override_settings(OAUTH2_PROVIDER=restricted):
            metadata.document = {"client_id": metadata.url, "client_name": "x", "redirect_uris": [REDIRECT_URI]}
            _, challenge = pkce_pair()
            response = self.browser.open_authorization(
                authorization_url(self.base, metadata.url, code_challenge=challenge, code_challenge_method="S256")
            )
            self.assertEqual(response.status_code, 400)
            self.assertEqual(metadata.requests, 0)
