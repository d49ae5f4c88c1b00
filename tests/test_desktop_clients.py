"""Desktop clients register as they really do and sign in, through the whole authorization code flow
against a live server over real HTTP, to a tool call at /mcp.

Each registration body is the one its client's public source or documentation shows, named where
it is used; an emulation written from documentation says so.
"""

import datetime as dt
from typing import Any
from urllib.parse import urlencode

import httpx2
from django.conf import settings
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from authserver.clients import registration
from authserver.models import PendingRegistration
from mcp_endpoint.auth import token_checksum
from tests.live import LiveServerTestCase
from tests.mcp_client import success_of, with_client
from tests.oauth_helpers import Browser, pkce_pair, query_of
from tests.sdk_oauth import LoopbackMetadataServer

Application = get_application_model()
AccessToken = get_access_token_model()
BOTH = "notes:read notes:write"

# Cursor's registration, exactly as it sends it (issue 55, captured from Cursor's request): three
# redirect URIs in one request, its own cursor: scheme first. Cursor's documentation names
# cursor://anysphere.cursor-mcp/oauth/callback as its MCP OAuth callback.
CURSOR_REGISTRATION = {
    "client_name": "Cursor",
    "redirect_uris": [
        "cursor://anysphere.cursor-mcp/oauth/callback",
        "https://www.cursor.com/agents/mcp/oauth/callback",
        "http://localhost:8787/callback",
    ],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}
CURSOR_CALLBACK = CURSOR_REGISTRATION["redirect_uris"][0]

# An emulation, written from VS Code's API reference (a UriHandler receives
# vscode://<publisher>.<extension-name>/<path>, env.uriScheme): an extension that registers itself
# and receives its callback there, as extensions such as linear.linear-connect do
# (linear/linear-vscode-connect-extension, issue 3: vscode://linear.linear-connect/callback).
VSCODE_EXTENSION_REGISTRATION = {
    "client_name": "Codex Notes for VS Code",
    "redirect_uris": ["vscode://acme.codex-notes/oauth/callback"],
    "grant_types": ["authorization_code", "refresh_token"],
    "response_types": ["code"],
    "token_endpoint_auth_method": "none",
}

# VS Code's own registration (microsoft/vscode, src/vs/base/common/oauth.ts, fetchDynamicRegistration),
# as its releases that asked for the device-code grant unconditionally sent it: the body quoted in
# modelcontextprotocol/python-sdk issue 1379 (VS Code against a server), with this server's scopes.
VSCODE_REGISTRATION_WITH_DEVICE_CODE = {
    "client_name": "Visual Studio Code",
    "client_uri": "https://code.visualstudio.com",
    "grant_types": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
    "response_types": ["code"],
    "redirect_uris": [
        "https://insiders.vscode.dev/redirect",
        "https://vscode.dev/redirect",
        "http://localhost/",
        "http://127.0.0.1/",
        "http://localhost:33418/",
        "http://127.0.0.1:33418/",
    ],
    "scope": BOTH,
    "token_endpoint_auth_method": "none",
    "application_type": "native",
}
# The same function today: the grant types it supports that the server's metadata lists (here
# authorization_code and refresh_token), and loopback redirect URIs on 127.0.0.1 only.
VSCODE_REGISTRATION = {
    **VSCODE_REGISTRATION_WITH_DEVICE_CODE,
    "grant_types": ["authorization_code", "refresh_token"],
    "redirect_uris": [
        "https://insiders.vscode.dev/redirect",
        "https://vscode.dev/redirect",
        "http://127.0.0.1/",
        "http://127.0.0.1:33418/",
    ],
}
# VS Code's loopback callback on its default port (DEFAULT_AUTH_FLOW_PORT in the same file).
VSCODE_CALLBACK = "http://127.0.0.1:33418/"


def vscode_metadata_document(client_id: str) -> dict[str, Any]:
    """VS Code's Client ID Metadata Document (https://vscode.dev/oauth/client-metadata.json), whose
    client id VS Code sends when a server supports documents (microsoft/vscode pull request 271403).
    An emulation: its members as published copies of the document show them (its grant types as
    stacklok/toolhive issue 6290 and better-auth pull request 9734 quote them), served here from
    a loopback address under that address."""
    return {
        "application_type": "native",
        "client_id": client_id,
        "client_name": "Visual Studio Code",
        "client_uri": "https://vscode.dev/product",
        "grant_types": ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        "response_types": ["code"],
        "redirect_uris": ["https://vscode.dev/redirect", VSCODE_CALLBACK],
        "token_endpoint_auth_method": "none",
    }


class DesktopClientsTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)

    # --- the client's side of the flow ---------------------------------------------------------

    def register(self, body: dict[str, Any]) -> dict[str, Any]:
        answer = httpx2.post(self.live.base_url + "/o/register/", json=body, timeout=30)
        self.assertEqual(answer.status_code, 201, answer.text)
        return answer.json()

    def consent_page(self, client_id: str, redirect_uri: str, **params: str) -> tuple[httpx2.Response, str]:
        """Signed in, the consent page of an authorization request with S256 PKCE; and the verifier."""
        verifier, challenge = pkce_pair()
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "state": "desktop-state",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            **params,
        }
        page = self.browser.open_authorization(self.live.base_url + "/o/authorize/?" + urlencode(query))
        self.assertEqual(page.status_code, 200, page.text[:2000])
        return page, verifier

    def approve(self, page: httpx2.Response, redirect_uri: str) -> dict[str, str]:
        """Press Allow; the answer the client receives at ``redirect_uri``, checked for code, state and iss."""
        answer = self.browser.decide(page, allow=True)
        self.assertEqual(answer.status_code, 302, answer.text[:2000])
        location = answer.headers["location"]
        self.assertTrue(location.startswith(redirect_uri + "?"), location)
        received = query_of(location)
        self.assertEqual(received["state"], "desktop-state")
        self.assertEqual(received["iss"], self.live.base_url + "/o")  # RFC 9207, whatever the scheme
        self.assertTrue(received["code"])
        return received

    def redeem(self, client_id: str, code: str, verifier: str, redirect_uri: str, **extra: str) -> dict[str, Any]:
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": redirect_uri,
            "client_id": client_id,
            "code_verifier": verifier,
            **extra,
        }
        answer = httpx2.post(self.live.base_url + "/o/token/", data=data, timeout=30)
        self.assertEqual(answer.status_code, 200, answer.text)
        return answer.json()

    def sign_in(self, client_id: str, redirect_uri: str, **params: str) -> dict[str, Any]:
        """The whole flow for a registered client: consent, the answer, the token (no resource
        sent at the token endpoint, as most clients send none there)."""
        page, verifier = self.consent_page(client_id, redirect_uri, **params)
        received = self.approve(page, redirect_uri)
        return self.redeem(client_id, received["code"], verifier, redirect_uri)

    def tools_and_a_search(self, access_token: str) -> dict[str, Any]:
        """Over real HTTP with the official SDK: list the tools and search (notes:read)."""

        async def work(client):
            tools = [tool.name for tool in (await client.list_tools()).tools]
            found = success_of(await client.call_tool("field_notes_search", {}))
            return {"tools": tools, "found": found}

        return with_client(self.mcp_url, access_token, "auto", work)

    def save_a_note(self, access_token: str, content: str) -> dict[str, Any]:
        async def work(client):
            entry = {"requestId": f"desktop-{content}", "entry": {"content": content}}
            return success_of(await client.call_tool("field_notes_save", entry))

        return with_client(self.mcp_url, access_token, "auto", work)

    def assert_signed_in_as_alice(self, tokens: dict[str, Any], scope: str = BOTH) -> None:
        self.assertEqual(tokens["scope"], scope)
        stored = AccessToken.objects.get(token_checksum=token_checksum(tokens["access_token"]))
        # Pinned to /mcp, though the token request named no resource.
        self.assertEqual((stored.user, stored.resource), (self.alice, [self.mcp_url]))
        seen = self.tools_and_a_search(tokens["access_token"])
        self.assertIn("field_notes_search", seen["tools"])
        self.assertIn("entries", seen["found"])

    # --- the clients --------------------------------------------------------------------------

    def test_cursor_registers_with_its_three_redirect_uris_and_signs_in_through_its_own_scheme(self) -> None:
        registered = self.register(CURSOR_REGISTRATION)
        self.assertEqual(registered["redirect_uris"], CURSOR_REGISTRATION["redirect_uris"])
        self.assertEqual(registered["token_endpoint_auth_method"], "none")
        page, verifier = self.consent_page(registered["client_id"], CURSOR_CALLBACK, scope=BOTH, resource=self.mcp_url)
        text = " ".join(page.text.split())
        self.assertIn("Allow <strong>Cursor</strong>", text)
        self.assertIn("your answer goes to <strong>Cursor</strong>, the application on this computer", text)
        self.assertIn("form-action 'self' cursor:", page.headers["content-security-policy"])
        received = self.approve(page, CURSOR_CALLBACK)
        tokens = self.redeem(registered["client_id"], received["code"], verifier, CURSOR_CALLBACK)
        self.assert_signed_in_as_alice(tokens)
        saved = self.save_a_note(tokens["access_token"], "Saved by Cursor")
        self.assertEqual(saved["entry"]["revision"], 1)
        # The person's connected applications name where it answers in the same words.
        clients = " ".join(self.browser.http.get(self.live.base_url + "/account/clients/").text.split())
        self.assertIn("<dt>Returns to</dt><dd>Cursor</dd>", clients)
        # Deny goes back to it too, with iss.
        page, _ = self.consent_page(registered["client_id"], CURSOR_CALLBACK, scope=BOTH)
        denied = self.browser.decide(page, allow=False)
        self.assertTrue(denied.headers["location"].startswith(CURSOR_CALLBACK + "?"), denied.headers["location"])
        self.assertEqual(
            query_of(denied.headers["location"]),
            {"error": "access_denied", "state": "desktop-state", "iss": self.live.base_url + "/o"},
        )
        # Its other redirect URIs serve as registered: its web agents' https one, its loopback one.
        for redirect_uri in CURSOR_REGISTRATION["redirect_uris"][1:]:
            with self.subTest(redirect_uri=redirect_uri):
                self.assert_signed_in_as_alice(self.sign_in(registered["client_id"], redirect_uri, scope=BOTH))

    def test_a_vscode_extension_signs_in_through_its_vscode_callback(self) -> None:
        registered = self.register(VSCODE_EXTENSION_REGISTRATION)
        callback = VSCODE_EXTENSION_REGISTRATION["redirect_uris"][0]
        page, verifier = self.consent_page(registered["client_id"], callback, scope=BOTH)
        self.assertIn("your answer goes to <strong>Visual Studio Code</strong>", " ".join(page.text.split()))
        received = self.approve(page, callback)
        self.assert_signed_in_as_alice(self.redeem(registered["client_id"], received["code"], verifier, callback))

    def test_vscode_registers_as_its_source_does_and_is_registered_with_the_grants_served_here(self) -> None:
        for name, body in [("today", VSCODE_REGISTRATION), ("with device code", VSCODE_REGISTRATION_WITH_DEVICE_CODE)]:
            with self.subTest(name):
                registered = self.register(body)
                # RFC 7591 §3.2.1: registered with the grant types this server serves, and told so.
                self.assertEqual(registered["grant_types"], ["authorization_code", "refresh_token"])
                self.assertEqual(registered["redirect_uris"], body["redirect_uris"])
                self.assert_signed_in_as_alice(self.sign_in(registered["client_id"], VSCODE_CALLBACK, scope=BOTH))

    def test_vscode_with_its_metadata_document_that_also_names_the_device_code_grant(self) -> None:
        with LoopbackMetadataServer() as metadata:
            metadata.document = vscode_metadata_document(metadata.url)
            tokens = self.sign_in(metadata.url, VSCODE_CALLBACK, scope=BOTH)
        self.assert_signed_in_as_alice(tokens)
        self.assertEqual(Application.objects.get(client_id=metadata.url).registration_source, "cimd")

    def test_a_registration_with_no_scope_gets_the_default_scope_at_the_token_endpoint(self) -> None:
        body = {key: value for key, value in VSCODE_REGISTRATION.items() if key != "scope"}
        registered = self.register(body)
        tokens = self.sign_in(registered["client_id"], VSCODE_CALLBACK)  # and no scope asked for
        self.assert_signed_in_as_alice(tokens, scope="notes:read")

    def test_a_client_that_sends_no_resource_anywhere_gets_a_token_for_mcp(self) -> None:
        registered = self.register(CURSOR_REGISTRATION)
        self.assert_signed_in_as_alice(self.sign_in(registered["client_id"], CURSOR_CALLBACK, scope=BOTH))

    def test_a_client_that_registers_afresh_at_every_sign_in_leaves_only_its_live_registrations(self) -> None:
        live = []
        for _ in range(2):  # two sign-ins, each with a registration of its own
            registered = self.register(CURSOR_REGISTRATION)
            live.append((registered["client_id"], self.sign_in(registered["client_id"], CURSOR_CALLBACK, scope=BOTH)))
        abandoned = []
        for _ in range(3):  # three more registrations whose sign-in was never finished
            registered = self.register(CURSOR_REGISTRATION)
            self.consent_page(registered["client_id"], CURSOR_CALLBACK, scope=BOTH)  # nobody presses Allow
            abandoned.append(registered["client_id"])
        self.assertEqual(PendingRegistration.objects.count(), 3)
        later = timezone.now() + dt.timedelta(seconds=settings.CODEX_DCR_PENDING_SECONDS + 1)
        self.assertEqual(registration.expire_pending(now=later), 3)
        remaining = set(Application.objects.values_list("client_id", flat=True))
        self.assertEqual(remaining, {client_id for client_id, _ in live})
        self.assertFalse(remaining & set(abandoned))
        for _, tokens in live:  # the live ones still call tools
            self.assert_signed_in_as_alice(tokens)
