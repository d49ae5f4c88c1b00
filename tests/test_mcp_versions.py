"""Protocol versions over real HTTP: exactly the documented ones, a clear error for any other,
and the same tools-only capabilities advertised in every version."""

from mcp_types import METHOD_NOT_FOUND, UNSUPPORTED_PROTOCOL_VERSION

from mcp_endpoint.versions import SUPPORTED_VERSIONS
from tests.http_client import MODERN, post, rpc_body
from tests.live import LiveServerTestCase

HANDSHAKE = ["2025-11-25", "2025-06-18", "2025-03-26"]
TOOLS_ONLY = {"tools": {"listChanged": False}}


def initialize_body(version: str) -> dict:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "1"}}
    return rpc_body("initialize", params)


class ProtocolVersionTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.token = self.token_for(self.make_user("alice"))

    def test_the_supported_versions_are_the_documented_ones(self) -> None:
        self.assertEqual(SUPPORTED_VERSIONS, ("2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"))

    def test_an_unknown_or_unserved_version_header_gets_400_naming_the_supported_versions(self) -> None:
        for version in ["2099-01-01", "2024-11-05", "latest", "2025-03-27"]:
            with self.subTest(version=version):
                response = post(self.mcp_url, rpc_body("tools/list", request_id=7), token=self.token, version=version)
                self.assertEqual(response.status_code, 400)
                body = response.json()
                self.assertEqual(body["id"], 7)
                self.assertEqual(body["error"]["code"], UNSUPPORTED_PROTOCOL_VERSION)
                self.assertEqual(body["error"]["data"], {"supported": list(SUPPORTED_VERSIONS), "requested": version})
                self.assertIn("2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26", body["error"]["message"])

    def test_initialize_agrees_to_a_served_version_and_counter_offers_2025_11_25_otherwise(self) -> None:
        for asked, answered in [
            ("2025-11-25", "2025-11-25"),
            ("2025-06-18", "2025-06-18"),
            ("2025-03-26", "2025-03-26"),
            ("2024-11-05", "2025-11-25"),
            ("1999-01-01", "2025-11-25"),
        ]:
            with self.subTest(asked=asked):
                response = post(self.mcp_url, initialize_body(asked), token=self.token, headers={})
                self.assertEqual(response.status_code, 200, response.text)
                self.assertEqual(response.json()["result"]["protocolVersion"], answered)

    def test_every_version_advertises_tools_only(self) -> None:
        for version in HANDSHAKE:
            with self.subTest(version=version):
                result = post(self.mcp_url, initialize_body(version), token=self.token, version=version).json()
                self.assertEqual(result["result"]["capabilities"], TOOLS_ONLY)
        discover = post(self.mcp_url, rpc_body("server/discover", version=MODERN), token=self.token, version=MODERN)
        self.assertEqual(discover.status_code, 200, discover.text)
        self.assertEqual(discover.json()["result"]["capabilities"], TOOLS_ONLY)

    def test_discover_initialize_and_the_version_error_serve_one_list(self) -> None:
        served = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
        discover = post(self.mcp_url, rpc_body("server/discover", version=MODERN), token=self.token, version=MODERN)
        self.assertEqual(discover.status_code, 200, discover.text)
        self.assertEqual(discover.json()["result"]["supportedVersions"], served)
        refused = post(self.mcp_url, rpc_body("tools/list"), token=self.token, version="2099-01-01")
        self.assertEqual(refused.json()["error"]["data"]["supported"], served)
        agreed = [
            post(self.mcp_url, initialize_body(version), token=self.token, headers={}).json()["result"][
                "protocolVersion"
            ]
            for version in served[1:]
        ]
        self.assertEqual(agreed, served[1:])

    def test_resources_prompts_logging_and_completions_are_not_served_in_any_version(self) -> None:
        calls = [
            ("resources/list", {}),
            ("resources/templates/list", {}),
            ("prompts/list", {}),
            ("logging/setLevel", {"level": "info"}),
            (
                "completion/complete",
                {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}},
            ),
        ]
        for version in [MODERN, *HANDSHAKE]:
            for method, params in calls:
                with self.subTest(version=version, method=method):
                    response = post(
                        self.mcp_url, rpc_body(method, params, version=version), token=self.token, version=version
                    )
                    error = response.json().get("error")
                    self.assertIsNotNone(error, response.text)
                    self.assertEqual(error["code"], METHOD_NOT_FOUND, response.text)
