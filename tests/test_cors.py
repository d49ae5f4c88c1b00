"""CORS over real HTTP: preflights and response headers on /mcp, the metadata documents and
the OAuth endpoints for allowed origins; for any other origin, 403 and no CORS headers, on /mcp
and on the OAuth endpoints alike (contract 7), with nothing served."""

import httpx2
from django.test import override_settings
from oauth2_provider.models import get_application_model

from mcp_endpoint.cors import ALLOW_HEADERS
from tests.http_client import post, rpc_body
from tests.live import LiveServerTestCase
from tests.oauth_helpers import Browser, authorization_url, exchange_code, pkce_pair, register_client

EVIL = "http://evil.example"
# The OAuth endpoints a browser-based client calls (settings.CORS_URLS_REGEX), and the method each takes.
OAUTH_PATHS = {
    "/.well-known/oauth-authorization-server/o": "GET",
    "/.well-known/oauth-authorization-server": "GET",
    "/o/.well-known/oauth-authorization-server": "GET",
    "/o/token/": "POST",
    "/o/register/": "POST",
    "/o/revoke_token/": "POST",
}
MCP_HEADERS = ", ".join(header.lower() for header in ALLOW_HEADERS)


class CorsTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.token = self.token_for(self.alice)
        # The live server is http://127.0.0.1:<port>; a page on http://localhost:<port> is the same machine and port.
        self.allowed = self.live.base_url.replace("127.0.0.1", "localhost")

    def preflight(self, path: str, origin: str, method: str = "POST", headers: str = "") -> httpx2.Response:
        request_headers = {"Origin": origin, "Access-Control-Request-Method": method}
        if headers:
            request_headers["Access-Control-Request-Headers"] = headers
        return httpx2.options(self.live.base_url + path, headers=request_headers)

    def assert_no_cors_headers(self, response: httpx2.Response) -> None:
        self.assertEqual([name for name in response.headers if name.lower().startswith("access-control-")], [])

    def test_the_mcp_preflight_allows_every_header_mcp_clients_send_without_a_token(self) -> None:
        for path in ["/mcp", "/mcp/"]:
            with self.subTest(path=path):
                response = self.preflight(path, self.allowed, headers=MCP_HEADERS)
                self.assertEqual(response.status_code, 200)
                self.assertEqual(response.headers["access-control-allow-origin"], self.allowed)
                allowed = {h.strip().lower() for h in response.headers["access-control-allow-headers"].split(",")}
                self.assertLessEqual(set(MCP_HEADERS.split(", ")), allowed)
                self.assertIn("POST", response.headers["access-control-allow-methods"])

    def test_an_mcp_response_to_an_allowed_origin_exposes_www_authenticate_and_mcp_headers(self) -> None:
        refused = post(self.mcp_url, rpc_body("tools/list"), headers={"Origin": self.allowed})
        self.assertEqual(refused.status_code, 401)
        self.assertEqual(refused.headers["access-control-allow-origin"], self.allowed)
        exposed = refused.headers["access-control-expose-headers"].lower()
        for header in ["www-authenticate", "mcp-session-id", "mcp-protocol-version"]:
            self.assertIn(header, exposed)
        served = post(self.mcp_url, rpc_body("tools/list"), token=self.token, headers={"Origin": self.allowed})
        self.assertEqual(served.status_code, 200)
        self.assertEqual(served.headers["access-control-allow-origin"], self.allowed)

    def test_an_origin_not_allowed_gets_403_and_no_cors_headers_on_mcp(self) -> None:
        preflight = self.preflight("/mcp", EVIL, headers="authorization, content-type")
        self.assertEqual(preflight.status_code, 403)
        self.assert_no_cors_headers(preflight)
        refused = post(self.mcp_url, rpc_body("tools/list"), token=self.token, headers={"Origin": EVIL})
        self.assertEqual(refused.status_code, 403)
        self.assert_no_cors_headers(refused)
        prm = httpx2.get(self.live.base_url + "/.well-known/oauth-protected-resource/mcp", headers={"Origin": EVIL})
        self.assert_no_cors_headers(prm)
        another_port = self.live.base_url.rsplit(":", 1)[0] + ":1"
        self.assertEqual(post(self.mcp_url, rpc_body("tools/list"), headers={"Origin": another_port}).status_code, 403)

    def test_the_metadata_and_oauth_endpoints_answer_preflights_for_allowed_origins(self) -> None:
        paths = [
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-authorization-server/o",
            "/.well-known/oauth-authorization-server",
            "/o/token/",
            "/o/register/",
            "/o/revoke_token/",
            "/.well-known/openid-configuration/o",  # probed by clients; a 404 the page can read
        ]
        for path in paths:
            with self.subTest(path=path):
                method = "GET" if "well-known" in path else "POST"
                response = self.preflight(path, self.allowed, method, "content-type, mcp-protocol-version")
                self.assertEqual(response.status_code, 200)
                self.assertEqual(response.headers["access-control-allow-origin"], self.allowed)
                self.assertIn("mcp-protocol-version", response.headers["access-control-allow-headers"].lower())
                refused = self.preflight(path, EVIL, method, "content-type")
                self.assertNotEqual(refused.headers.get("access-control-allow-origin"), EVIL)

    def test_registration_and_token_responses_carry_cors_headers_for_allowed_origins_only(self) -> None:
        registered = register_client(self.live.base_url)
        self.assertNotIn("access-control-allow-origin", registered.headers)
        body = {
            "redirect_uris": ["http://localhost:9/callback"],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code"],
        }
        cross = httpx2.post(self.live.base_url + "/o/register/", json=body, headers={"Origin": self.allowed})
        self.assertEqual(cross.status_code, 201)
        self.assertEqual(cross.headers["access-control-allow-origin"], self.allowed)
        token = httpx2.post(
            self.live.base_url + "/o/token/",
            data={"grant_type": "authorization_code", "code": "nope", "client_id": cross.json()["client_id"]},
            headers={"Origin": self.allowed},
        )
        self.assertEqual(token.status_code, 400)  # refused, yet readable by the page
        self.assertEqual(token.headers["access-control-allow-origin"], self.allowed)
        evil = httpx2.post(self.live.base_url + "/o/register/", json=body, headers={"Origin": EVIL})
        self.assertNotIn("access-control-allow-origin", evil.headers)

    def test_the_sign_in_and_consent_pages_never_answer_cross_origin(self) -> None:
        for path in ["/accounts/login/", "/o/authorize/", "/account/clients/", "/admin/login/"]:
            with self.subTest(path=path):
                response = self.preflight(path, self.allowed)
                self.assertNotIn("access-control-allow-origin", response.headers)

    def test_an_origin_not_allowed_gets_403_on_the_oauth_endpoints_and_nothing_is_served(self) -> None:
        client_id = register_client(self.live.base_url).json()["client_id"]
        applications = get_application_model().objects.count()
        for path, method in OAUTH_PATHS.items():
            with self.subTest(path=path):
                preflight = self.preflight(path, EVIL, method, "content-type")
                self.assertEqual(preflight.status_code, 403, preflight.text)
                self.assert_no_cors_headers(preflight)
                if method == "GET":
                    answer = httpx2.get(self.live.base_url + path, headers={"Origin": EVIL})
                else:
                    answer = httpx2.post(
                        self.live.base_url + path,
                        data={"grant_type": "authorization_code", "code": "x", "client_id": client_id, "token": "x"},
                        headers={"Origin": EVIL},
                    )
                self.assertEqual(answer.status_code, 403, answer.text)
                self.assertEqual(answer.json()["error"], "origin_not_allowed")
                self.assertEqual(answer.headers["cache-control"], "no-store")
                self.assert_no_cors_headers(answer)
        registration = {
            "redirect_uris": ["http://localhost:9/callback"],
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code"],
        }
        another_port = self.live.base_url.rsplit(":", 1)[0] + ":1"
        for origin in (EVIL, another_port, "null", ""):
            with self.subTest(origin=origin):
                refused = httpx2.post(
                    self.live.base_url + "/o/register/", json=registration, headers={"Origin": origin}
                )
                self.assertEqual(refused.status_code, 403, refused.text)
        self.assertEqual(get_application_model().objects.count(), applications)

    @override_settings(CODEX_ALLOWED_ORIGINS=["https://inspector.example"])
    def test_requests_without_an_origin_and_the_consent_pages_own_form_are_served_as_before(self) -> None:
        # Native and server-side clients send no Origin: nothing changes for them.
        self.assertEqual(register_client(self.live.base_url).status_code, 201)
        metadata = httpx2.get(self.live.base_url + "/.well-known/oauth-authorization-server/o")
        self.assertEqual(metadata.status_code, 200)
        # The consent page posts its form to itself, from the site's own origin, which the
        # operator need not list: the authorization endpoint is no CORS path (CSRF guards it).
        client_id = register_client(self.live.base_url).json()["client_id"]
        browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(browser.close)
        browser.http.headers["Origin"] = self.live.base_url
        verifier, challenge = pkce_pair()
        url = authorization_url(
            self.live.base_url, client_id, code_challenge=challenge, code_challenge_method="S256", scope="notes:read"
        )
        redirect = browser.authorize(url)
        self.assertIn("code", redirect)
        token = exchange_code(self.live.base_url, client_id, redirect["code"], verifier)
        self.assertEqual(token.status_code, 200, token.text)
