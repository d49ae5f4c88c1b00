"""Real clients of several eras against a live server, over real HTTP: each lists the tools and
calls all four. The clients of the 2025-03-26 era (the Python SDK 1.9, the TypeScript SDK
1.12, and the editors built on them) get that version's answers; the TypeScript SDK of today,
1.x and 2.x, also signs in through OAuth by itself, with dynamic registration and with a
Client ID Metadata Document."""

from unittest import SkipTest
from urllib.parse import urlencode

from oauth2_provider.models import get_access_token_model, get_application_model

import tests.test_docs_examples as docs_examples
from notebook.models import Entry
from tests.live import LiveServerTestCase
from tests.oauth_helpers import REDIRECT_URI, Browser
from tests.real_clients import PYTHON_SDK_1, TS_CLIENT, TS_SDK, TS_SDK_OLD, TypeScriptClient, run_python_client
from tests.sdk_oauth import LoopbackMetadataServer
from tests.test_docs_examples import npx_available

TOOL_NAMES = ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"]


class RealClientTestCase(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")

    def assert_all_four_tools_worked(self, seen: dict) -> None:
        self.assertEqual(seen["server"], "agent-codex")
        self.assertEqual(seen["tools"], TOOL_NAMES)
        entry = Entry.objects.get(id=seen["saved"])
        self.assertEqual(entry.codex.owner, self.alice)
        self.assertIn(seen["saved"], seen["found"])
        self.assertEqual(seen["updated"], [2, entry.content])
        self.assertEqual(entry.revision, 2)


class ClientsOf2025_03_26Test(RealClientTestCase):
    def test_the_python_sdk_1_9_lists_the_tools_and_calls_all_four(self) -> None:
        seen = run_python_client(self.mcp_url, self.token_for(self.alice))
        self.assertEqual(seen["protocolVersion"], "2025-03-26")
        self.assertEqual(seen["outputSchemas"], [])  # that version has none
        self.assertEqual(seen["got"], "Saved by the Python SDK 1.9.4")
        self.assert_all_four_tools_worked(seen)

    def test_the_typescript_sdk_1_12_lists_the_tools_and_calls_all_four(self) -> None:
        client = TypeScriptClient("@modelcontextprotocol/sdk", TS_SDK_OLD)
        seen = client.run(self.mcp_url, "token", self.token_for(self.alice))
        self.assertEqual(seen["outputSchemas"], [])  # answered as 2025-03-26: it sends no version header
        self.assert_all_four_tools_worked(seen)


class ClientsOf2025_11_25Test(RealClientTestCase):
    def test_the_python_sdk_1_30_lists_the_tools_and_calls_all_four(self) -> None:
        seen = run_python_client(self.mcp_url, self.token_for(self.alice), PYTHON_SDK_1)
        self.assertEqual(seen["protocolVersion"], "2025-11-25")
        self.assertEqual(seen["outputSchemas"], TOOL_NAMES)
        self.assert_all_four_tools_worked(seen)


class TodaysTypeScriptClientsTest(RealClientTestCase):
    """Today's TypeScript SDK signs in by itself: discovery, registration, consent, tools."""

    RELEASES = [("@modelcontextprotocol/sdk", TS_SDK), ("@modelcontextprotocol/client", TS_CLIENT)]

    def setUp(self) -> None:
        super().setUp()
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)

    def approve(self, url: str) -> str:
        answer = self.browser.authorize(url)
        self.assertEqual(answer["iss"], self.live.base_url + "/o")
        return urlencode(answer)

    def assert_signed_in_as_alice(self, seen: dict) -> None:
        self.assertEqual(seen["outputSchemas"], TOOL_NAMES)
        self.assert_all_four_tools_worked(seen)
        # (A registered client also holds its registration access token, RFC 7592.)
        token = get_access_token_model().objects.get(application__client_id=seen["clientId"], scope__contains="notes:")
        self.assertEqual((token.user, token.resource, token.token), (self.alice, [self.mcp_url], ""))

    def test_with_dynamic_client_registration(self) -> None:
        for package, version in self.RELEASES:
            with self.subTest(package=package, version=version):
                seen = TypeScriptClient(package, version).run(self.mcp_url, "dcr", REDIRECT_URI, self.approve)
                application = get_application_model().objects.get(client_id=seen["clientId"])
                self.assertEqual(application.registration_source, "dcr")
                self.assert_signed_in_as_alice(seen)

    def test_with_a_client_id_metadata_document(self) -> None:
        for package, version in self.RELEASES:
            with self.subTest(package=package, version=version), LoopbackMetadataServer() as metadata:
                metadata.document = {
                    "client_id": metadata.url,
                    "client_name": f"TypeScript {version}",
                    "redirect_uris": [REDIRECT_URI],
                    "grant_types": ["authorization_code", "refresh_token"],
                    "response_types": ["code"],
                    "token_endpoint_auth_method": "none",
                }
                seen = TypeScriptClient(package, version).run(self.mcp_url, "cimd", metadata.url, self.approve)
                self.assertEqual(seen["clientId"], metadata.url)
                application = get_application_model().objects.get(client_id=metadata.url)
                self.assertEqual(application.registration_source, "cimd")
                self.assert_signed_in_as_alice(seen)


class McpRemoteTest(RealClientTestCase):
    """mcp-remote, the stdio bridge of clients that speak only stdio, old and new releases."""

    def test_each_release_lists_the_tools_over_stdio(self) -> None:
        if not npx_available():  # raises instead where CODEX_REQUIRE_NODE=1
            raise SkipTest("mcp-remote needs npx (apt-get install nodejs npm)")
        token = self.token_for(self.alice)
        for version in ("0.1.49", "0.15.1"):
            with self.subTest(version=version):
                server = {"command": "npx", "args": ["-y", f"mcp-remote@{version}", self.mcp_url]}
                self.assertEqual(docs_examples.DocumentedExamplesTest.tool_names_over_stdio(server, token), TOOL_NAMES)
