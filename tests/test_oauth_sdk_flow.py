"""The official SDK's OAuthClientProvider against the real server: an MCP client that knows
only <base>/mcp discovers, registers, has a person sign in and approve, and calls tools."""

from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_endpoint.auth import token_checksum
from tests.live import LiveServerTestCase
from tests.mcp_client import success_of, with_client
from tests.oauth_helpers import Browser, authorization_url, exchange_code, pkce_pair, register_client
from tests.sdk_oauth import ConsentingUser, LoopbackMetadataServer, MemoryStorage, client_metadata


async def save_and_search(client: Client) -> tuple[dict, dict]:
    await client.list_tools()
    saved = success_of(
        await client.call_tool("field_notes_save", {"requestId": "oauth-1", "entry": {"content": "via OAuth"}})
    )
    page = success_of(await client.call_tool("field_notes_search", {"query": "oauth"}))
    return saved, page


class SdkOAuthFlowTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)
        self.user = ConsentingUser(self.browser)
        self.storage = MemoryStorage()

    def provider(self, **kwargs) -> OAuthClientProvider:
        return OAuthClientProvider(
            server_url=self.mcp_url,
            client_metadata=client_metadata(),
            storage=self.storage,
            redirect_handler=self.user.redirect_handler,
            callback_handler=self.user.callback_handler,
            **kwargs,
        )

    def assert_token_is_audience_bound(self) -> None:
        token = get_access_token_model().objects.get(token_checksum=token_checksum(self.storage.tokens.access_token))
        self.assertEqual(token.resource, [self.mcp_url])
        self.assertEqual(token.user, self.alice)
        self.assertEqual(set(token.scope.split()), {"notes:read", "notes:write"})
        self.assertEqual(token.token, "")  # stored hashed

    def test_discovery_dynamic_registration_consent_and_tool_calls(self) -> None:
        saved, page = with_client(self.mcp_url, None, "auto", save_and_search, auth=self.provider())
        self.assertEqual(saved["entry"]["revision"], 1)
        self.assertEqual([e["id"] for e in page["entries"]], [saved["entry"]["id"]])
        # The SDK registered dynamically (a public client) and asked for PKCE S256 and our resource.
        application = get_application_model().objects.get(client_id=self.storage.client_info.client_id)
        self.assertEqual((application.registration_source, application.client_type), ("dcr", "public"))
        [url] = self.user.authorization_urls
        self.assertIn("code_challenge_method=S256", url)
        self.assertIn("resource=", url)
        self.assertEqual(self.user.redirect["iss"], self.live.base_url + "/o")
        self.assert_token_is_audience_bound()
        self.assertEqual(self.alice.codex.entries.count(), 1)

    def test_the_same_with_a_client_id_metadata_document_on_loopback(self) -> None:
        with LoopbackMetadataServer() as metadata:
            metadata.document = {
                "client_id": metadata.url,
                "client_name": "Metadata-document agent",
                "redirect_uris": ["http://127.0.0.1:9/callback"],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            }
            saved, _ = with_client(
                self.mcp_url, None, "auto", save_and_search, auth=self.provider(client_metadata_url=metadata.url)
            )
            self.assertGreaterEqual(metadata.requests, 1)
        self.assertEqual(saved["entry"]["content"], "via OAuth")
        self.assertEqual(self.storage.client_info.client_id, metadata.url)
        application = get_application_model().objects.get(client_id=metadata.url)
        self.assertEqual((application.registration_source, application.name), ("cimd", "Metadata-document agent"))
        self.assertFalse(get_application_model().objects.filter(registration_source="dcr").exists())
        self.assert_token_is_audience_bound()


class StepUpTest(LiveServerTestCase):
    """A client holding only notes:read gets 403 insufficient_scope on save, re-authorizes
    with notes:read notes:write through the SDK, and then succeeds."""

    def test_insufficient_scope_steps_up_and_succeeds(self) -> None:
        self.make_user("alice")
        base = self.live.base_url
        registration = register_client(base).json()
        browser = Browser(base, "alice", "alice-password")
        self.addCleanup(browser.close)
        verifier, challenge = pkce_pair()
        redirect = browser.authorize(
            authorization_url(
                base,
                registration["client_id"],
                scope="notes:read",
                code_challenge=challenge,
                code_challenge_method="S256",
                resource=self.mcp_url,
            )
        )
        read_only = exchange_code(base, registration["client_id"], redirect["code"], verifier).json()
        self.assertEqual(read_only["scope"], "notes:read")

        storage = MemoryStorage()
        storage.client_info = OAuthClientInformationFull.model_validate(registration)
        storage.tokens = OAuthToken.model_validate(read_only)
        user = ConsentingUser(browser)
        provider = OAuthClientProvider(
            server_url=self.mcp_url,
            client_metadata=client_metadata(),
            storage=storage,
            redirect_handler=user.redirect_handler,
            callback_handler=user.callback_handler,
        )

        async def work(client: Client) -> dict:
            success_of(await client.call_tool("field_notes_search", {}))  # read works with the old token
            self.assertEqual(user.authorization_urls, [])
            return success_of(
                await client.call_tool("field_notes_save", {"requestId": "up", "entry": {"content": "stepped up"}})
            )

        saved = with_client(self.mcp_url, None, "auto", work, auth=provider)
        self.assertEqual(saved["entry"]["content"], "stepped up")
        [step_up_url] = user.authorization_urls
        self.assertIn("notes%3Aread+notes%3Awrite", step_up_url.replace("%20", "+"))
        self.assertEqual(set(storage.tokens.scope.split()), {"notes:read", "notes:write"})
