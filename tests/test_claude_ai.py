"""claude.ai's way of connecting, emulated from its documentation and its users' reports: it
uses a Client ID Metadata Document declaring ``none`` once the server advertises both
(``client_id_metadata_document_supported`` and ``none``), omits ``resource`` on the
authorization and token requests, asks for every advertised scope, and sends its calls after
``initialize`` without ``MCP-Protocol-Version`` (served as 2025-03-26: the JSON text alone)."""

import json

import httpx2
from oauth2_provider.models import get_access_token_model, get_application_model

from tests.http_client import post, rpc_body
from tests.live import LiveServerTestCase
from tests.loopback_http import DocumentsServer
from tests.oauth_helpers import Browser, authorization_url, pkce_pair, query_of

REDIRECT = "https://claude.ai/api/mcp/auth_callback"


class ClaudeAiTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)
        self.documents = self.enterContext(DocumentsServer())
        self.client_id = self.documents.origin + "/oauth/mcp-oauth-client-metadata"
        self.documents.documents["/oauth/mcp-oauth-client-metadata"] = {
            "client_id": self.client_id,
            "client_name": "Claude",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }

    def discover(self) -> tuple[dict, dict]:
        challenge = httpx2.post(self.mcp_url, json=rpc_body("initialize"), timeout=30)
        self.assertEqual(challenge.status_code, 401)
        resource = httpx2.get(self.live.base_url + "/.well-known/oauth-protected-resource/mcp", timeout=30).json()
        issuer = resource["authorization_servers"][0]
        server = httpx2.get(self.live.base_url + "/.well-known/oauth-authorization-server/o", timeout=30).json()
        self.assertEqual(server["issuer"], issuer)
        return resource, server

    def sign_in(self, server: dict, scope: str) -> dict:
        verifier, challenge = pkce_pair()
        url = authorization_url(
            self.live.base_url,
            self.client_id,
            redirect_uri=REDIRECT,
            scope=scope,
            code_challenge=challenge,
            code_challenge_method="S256",
        )  # no resource
        self.assertNotIn("resource=", url)
        answer = self.browser.authorize(url)
        self.assertEqual(answer["iss"], server["issuer"])
        granted = httpx2.post(
            server["token_endpoint"],
            data={
                "grant_type": "authorization_code",
                "code": answer["code"],
                "redirect_uri": REDIRECT,
                "client_id": self.client_id,
                "code_verifier": verifier,
            },  # no resource
            timeout=30,
        )
        self.assertEqual(granted.status_code, 200, granted.text)
        return granted.json()

    def call(self, token: str, name: str, arguments: dict) -> dict:
        """A call as claude.ai sends it after initialize: no MCP-Protocol-Version header."""
        response = post(
            self.mcp_url, rpc_body("tools/call", {"name": name, "arguments": arguments}), token=token, version=None
        )
        self.assertEqual(response.status_code, 200, response.text)
        result = response.json()["result"]
        self.assertFalse(result["isError"], result)
        self.assertNotIn("structuredContent", result)  # 2025-03-26 has none
        return json.loads(result["content"][0]["text"])

    def test_discovery_metadata_document_consent_tokens_refresh_and_the_four_tools(self) -> None:
        resource, server = self.discover()
        # What makes claude.ai use its metadata document instead of registering per connection.
        self.assertTrue(server["client_id_metadata_document_supported"])
        self.assertIn("none", server["token_endpoint_auth_methods_supported"])
        tokens = self.sign_in(server, " ".join(resource["scopes_supported"]))
        self.assertEqual(tokens["scope"], "notes:read notes:write")
        application = get_application_model().objects.get(client_id=self.client_id)
        self.assertEqual((application.registration_source, application.name), ("cimd", "Claude"))
        stored = get_access_token_model().objects.get(application=application, user=self.alice)
        self.assertEqual(stored.resource, [self.mcp_url])  # the missing resource pinned to /mcp

        initialized = post(
            self.mcp_url,
            rpc_body(
                "initialize",
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "claude-ai", "version": "0.1"},
                },
            ),
            token=tokens["access_token"],
            version=None,
        )
        self.assertEqual(initialized.json()["result"]["protocolVersion"], "2025-06-18")
        listed = post(self.mcp_url, rpc_body("tools/list"), token=tokens["access_token"], version=None).json()
        self.assertEqual(len(listed["result"]["tools"]), 4)
        saved = self.call(
            tokens["access_token"], "field_notes_save", {"requestId": "c-1", "entry": {"content": "From Claude"}}
        )
        entry_id = saved["entry"]["id"]
        self.assertEqual(
            self.call(tokens["access_token"], "field_notes_get", {"id": entry_id})["entry"]["content"], "From Claude"
        )
        found = self.call(tokens["access_token"], "field_notes_search", {"query": "claude"})["entries"]
        self.assertEqual([entry["id"] for entry in found], [entry_id])

        refreshed = httpx2.post(
            server["token_endpoint"],
            data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": self.client_id},
            timeout=30,
        )
        self.assertEqual(refreshed.status_code, 200, refreshed.text)
        update = {"id": entry_id, "expectedRevision": 1, "entry": {"content": "From Claude, again"}}
        self.assertEqual(
            self.call(refreshed.json()["access_token"], "field_notes_update", update)["entry"]["revision"], 2
        )

    def test_an_empty_scope_gets_the_default_and_a_save_asks_for_more(self) -> None:
        _resource, server = self.discover()
        tokens = self.sign_in(server, "")
        self.assertEqual(tokens["scope"], "notes:read")
        self.assertEqual(self.call(tokens["access_token"], "field_notes_search", {})["entries"], [])
        body = rpc_body(
            "tools/call", {"name": "field_notes_save", "arguments": {"requestId": "x", "entry": {"content": "c"}}}
        )
        refused = post(self.mcp_url, body, token=tokens["access_token"], version=None)
        self.assertEqual(refused.status_code, 403)
        self.assertIn('scope="notes:read notes:write"', refused.headers["www-authenticate"])

    def test_a_redirect_uri_its_document_does_not_list_is_refused_in_words(self) -> None:
        url = authorization_url(
            self.live.base_url,
            self.client_id,
            redirect_uri="https://claude.ai/elsewhere",
            code_challenge=pkce_pair()[1],
            code_challenge_method="S256",
        )
        page = self.browser.open_authorization(url)
        self.assertEqual(page.status_code, 400, page.text)
        self.assertIn("is not one of the redirect_uris it lists", page.text)
        self.assertNotIn("code", query_of(page.headers.get("location", "")))
