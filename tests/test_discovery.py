"""The server can be found, cached and shown before anyone connects (contract 10): cache hints
on tools/list and server/discover, serverInfo's icon, website and description, the server card
and the AI Catalog, and server.json for the MCP Registry. All of it from one record,
``mcp_endpoint.identity``."""

import asyncio
import itertools
import json
import struct
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from codex_site.asgi import build_application
from mcp_endpoint import identity
from mcp_endpoint.tools import TOOLS
from tests.http_client import MODERN, OLDEST, call_tool, post, rpc_body
from tests.live import LiveServer, LiveServerTestCase, ThreadedServer

AN_HOUR_MS = 3_600_000
STAMP = "io.modelcontextprotocol/serverInfo"


class CountingLiveServer(LiveServer):
    """The real application, noting the JSON-RPC method of every message posted to /mcp as it
    arrives (before any answer): a test counts what reached the server, not what a client says
    it sent."""

    def start(self) -> None:
        self.methods: list[str] = []
        application = build_application()

        async def counting(scope, receive, send) -> None:
            if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/mcp":
                await application(scope, receive, send)
                return
            messages = [await receive()]
            while messages[-1].get("more_body"):
                messages.append(await receive())
            body = b"".join(message.get("body", b"") for message in messages)
            self.methods.append(json.loads(body).get("method", "?"))

            async def replay():
                return messages.pop(0) if messages else await receive()

            await application(scope, replay, send)

        self.app = counting
        ThreadedServer.start(self)

    def listings(self) -> int:
        return self.methods.count("tools/list")


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


class CacheHintsTest(LiveServerTestCase):
    server_class = CountingLiveServer

    def setUp(self) -> None:
        self.alice_token = self.token_for(self.make_user("alice"))
        self.bob_token = self.token_for(self.make_user("bob"))

    def result(self, method: str, token: str, version: str | None, params: dict | None = None) -> dict[str, Any]:
        body = rpc_body(method, params, version=version or OLDEST)
        answer = post(self.mcp_url, body, token=token, version=version)
        self.assertEqual(answer.status_code, 200, answer.text)
        return answer.json()["result"]

    def test_the_listing_and_discover_may_be_kept_an_hour_by_anyone_in_2026_07_28(self) -> None:
        for method in ["tools/list", "server/discover"]:
            with self.subTest(method=method):
                result = self.result(method, self.alice_token, MODERN)
                self.assertEqual((result["ttlMs"], result["cacheScope"]), (AN_HOUR_MS, "public"))
        listed = self.result("tools/list", self.alice_token, MODERN)["tools"]
        self.assertEqual([tool["name"] for tool in listed], [tool.name for tool in TOOLS])

    def test_the_listing_and_discover_are_the_same_whoever_asks(self) -> None:
        # What makes "public" true: nothing in them depends on the person or the token.
        for version in [MODERN, "2025-11-25", "2025-06-18", None]:
            methods = ["tools/list", "server/discover"] if version == MODERN else ["tools/list"]
            for method in methods:
                with self.subTest(version=version, method=method):
                    self.assertEqual(
                        self.result(method, self.alice_token, version), self.result(method, self.bob_token, version)
                    )

    def test_earlier_versions_get_no_hints_since_their_results_define_none(self) -> None:
        for version in ["2025-11-25", "2025-06-18", None]:  # None: no header, served as 2025-03-26
            with self.subTest(version=version):
                result = self.result("tools/list", self.alice_token, version)
                self.assertEqual(list(result), ["tools"])

    def test_a_tool_call_carries_no_hint(self) -> None:
        for version in [MODERN, "2025-11-25"]:
            with self.subTest(version=version):
                answer = call_tool(self.mcp_url, self.alice_token, "field_notes_search", {}, version=version)
                result = answer.json()["result"]
                self.assertNotIn("ttlMs", result)
                self.assertNotIn("cacheScope", result)

    def test_the_sdk_client_keeps_the_listing_and_asks_again_only_when_told(self) -> None:
        async def three_listings(client: Client) -> tuple[list[int], list[Any]]:
            counts, listings = [self.live.listings()], []
            for mode in ["use", "use", "bypass"]:
                listings.append(await client.list_tools(cache_mode=mode))
                counts.append(self.live.listings())
            return counts, listings

        counts, listings = self.with_sdk_client("auto", three_listings)  # 2026-07-28
        self.assertEqual((listings[0].ttl_ms, listings[0].cache_scope), (AN_HOUR_MS, "public"))
        self.assertEqual(listings[1].tools, listings[0].tools)
        # The first listing reached the server; the second, within the hour, did not; one
        # that bypasses the cache did (so the count is of what reached it).
        self.assertEqual([after - before for before, after in itertools.pairwise(counts)], [1, 0, 1])

        counts, _ = self.with_sdk_client("legacy", three_listings)  # 2025-11-25: no hints, no cache
        self.assertEqual([after - before for before, after in itertools.pairwise(counts)], [1, 1, 1])

    def with_sdk_client(self, mode: str, work):
        async def run():
            headers = {"Authorization": f"Bearer {self.alice_token}"}
            async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
                async with Client(streamable_http_client(self.mcp_url, http_client=http), mode=mode) as client:
                    return await work(client)

        return asyncio.run(run())


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
