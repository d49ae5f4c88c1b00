"""The server can be found, cached and shown before anyone connects (contract 10): cache hints
on tools/list and server/discover, serverInfo's icon, website and description, the server card
and the AI Catalog, and server.json for the MCP Registry. All of it from one record,
``mcp_endpoint.identity``."""

import asyncio
import struct
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_endpoint import identity
from tests.http_client import MODERN, post, rpc_body
from tests.live import LiveServerTestCase

STAMP = "io.modelcontextprotocol/serverInfo"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", data[16:24])


def expected_server_info(base: str) -> dict[str, Any]:
    return {
        "name": "agent-codex",
        "title": "Agent Codex",
        "version": "0.1.0",
        "description": identity.DESCRIPTION,
        "websiteUrl": base + "/",
        "icons": [
            {"src": base + "/static/codex/icon.svg", "mimeType": "image/svg+xml", "sizes": ["any"]},
            {"src": base + "/static/codex/icon-256.png", "mimeType": "image/png", "sizes": ["256x256"]},
        ],
    }


def initialize_body(version: str) -> dict:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw-test", "version": "1"}}
    return rpc_body("initialize", params)


class ServerInfoTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.token = self.token_for(self.make_user("alice"))

    def test_every_version_names_the_icon_website_and_description(self) -> None:
        # 2025-11-25 defines them; 2025-06-18's and 2025-03-26's Implementation is an open object
        # (no additionalProperties: false in their published schemas), so their clients get the
        # same members as ones they may ignore, as they already got title.
        expected = expected_server_info(self.live.base_url)
        for version in ["2025-11-25", "2025-06-18", "2025-03-26"]:
            with self.subTest(version=version):
                answer = post(self.mcp_url, initialize_body(version), token=self.token, version=version)
                self.assertEqual(answer.json()["result"]["serverInfo"], expected)
        discover = post(self.mcp_url, rpc_body("server/discover", version=MODERN), token=self.token, version=MODERN)
        self.assertEqual(discover.json()["result"]["_meta"][STAMP], expected)

    def test_the_icons_are_served_as_they_are_described(self) -> None:
        for icon in expected_server_info(self.live.base_url)["icons"]:
            with self.subTest(src=icon["src"]):
                answer = httpx2.get(icon["src"], timeout=30)
                self.assertEqual(answer.status_code, 200)
                self.assertEqual(answer.headers["content-type"].split(";")[0], icon["mimeType"])
                if icon["mimeType"] == "image/png":
                    self.assertEqual(
                        [f"{width}x{height}" for width, height in [png_size(answer.content)]], icon["sizes"]
                    )
                else:
                    self.assertIn(b"<svg", answer.content)

    def test_the_sdk_client_reads_them(self) -> None:
        async def info(client: Client):
            return client.server_info

        headers = {"Authorization": f"Bearer {self.token}"}

        async def run():
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                async with Client(streamable_http_client(self.mcp_url, http_client=http), mode="legacy") as client:
                    return await info(client)

        server_info = asyncio.run(run())
        self.assertEqual(server_info.description, identity.DESCRIPTION)
        self.assertEqual(server_info.website_url, self.live.base_url + "/")
        self.assertEqual([icon.mime_type for icon in server_info.icons], ["image/svg+xml", "image/png"])
