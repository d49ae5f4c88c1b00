"""The server can be found, cached and shown before anyone connects (contract 10): cache hints
on tools/list and server/discover, serverInfo's icon, website and description, the server card
and the AI Catalog, and server.json for the MCP Registry. All of it from one record,
``mcp_endpoint.identity``."""

import asyncio
import itertools
import json
import struct
import subprocess
import sys
from io import StringIO
from typing import Any

import httpx2
from django.conf import settings
from django.core.management import call_command
from django.test import SimpleTestCase, override_settings
from hypothesis import given
from hypothesis import strategies as st
from jsonschema import Draft7Validator
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from codex_site.asgi import build_application
from codex_site.checks import configuration_problem
from codex_site.settings import public_url_settings
from mcp_endpoint import discovery, identity
from mcp_endpoint.listing import SERVER_JSON_PATH, render
from mcp_endpoint.tools import TOOLS
from mcp_endpoint.versions import SUPPORTED_VERSIONS
from tests.discovery_rules import AI_CATALOG, SERVER_CARD, SERVER_JSON
from tests.http_client import MODERN, OLDEST, call_tool, post, rpc_body
from tests.live import LiveServer, LiveServerTestCase, ThreadedServer

AN_HOUR_MS = 3_600_000
STAMP = "io.modelcontextprotocol/serverInfo"
EVIL = "https://evil.example"


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


class ServerCardTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.card_url = self.mcp_url + "/server-card"
        self.catalog_url = self.live.base_url + "/.well-known/ai-catalog.json"

    def get(self, url: str, **headers: str) -> httpx2.Response:
        return httpx2.get(url, headers={"Accept": "application/mcp-server-card+json", **headers}, timeout=30)

    def test_the_card_is_public_cacheable_and_open_to_every_origin(self) -> None:
        answer = self.get(self.card_url, Origin=EVIL)
        self.assertEqual(answer.status_code, 200, answer.text)
        self.assertEqual(answer.headers["content-type"], "application/mcp-server-card+json")
        self.assertEqual(answer.headers["access-control-allow-origin"], "*")
        self.assertEqual(answer.headers["access-control-expose-headers"], "ETag")
        self.assertEqual(answer.headers["cache-control"], "public, max-age=3600")
        self.assertRegex(answer.headers["etag"], r'^"[0-9a-f]{32}"$')
        Draft7Validator(SERVER_CARD).validate(answer.json())

    def test_the_card_says_what_the_live_server_says(self) -> None:
        card = self.get(self.card_url).json()
        token = self.token_for(self.make_user("alice"))
        info = post(self.mcp_url, initialize_body("2025-11-25"), token=token).json()["result"]["serverInfo"]
        discover = post(self.mcp_url, rpc_body("server/discover", version=MODERN), token=token, version=MODERN)
        for member in ["title", "description", "version", "websiteUrl", "icons"]:
            self.assertEqual(card[member], info[member], member)
        self.assertEqual(card["name"], identity.Instance.configured().registry_name)
        self.assertEqual(
            card["remotes"],
            [
                {
                    "type": "streamable-http",
                    "url": self.mcp_url,
                    "supportedProtocolVersions": discover.json()["result"]["supportedVersions"],
                }
            ],
        )
        self.assertEqual(card["remotes"][0]["supportedProtocolVersions"], list(SUPPORTED_VERSIONS))
        self.assertNotIn("tools", card)  # the card describes how to connect; the tools are listed once connected

    def test_a_known_tag_is_answered_304_and_any_other_in_full(self) -> None:
        etag = self.get(self.card_url).headers["etag"]
        for sent, status in [
            (etag, 304),
            ("W/" + etag, 304),
            (f'"other", {etag}', 304),
            ("*", 304),
            ('"other"', 200),
            ("garbage", 200),
            ("", 200),
        ]:
            with self.subTest(sent=sent):
                answer = self.get(self.card_url, **{"If-None-Match": sent})
                self.assertEqual(answer.status_code, status)
                self.assertEqual(answer.headers["etag"], etag)
                self.assertEqual(answer.headers["cache-control"], "public, max-age=3600")
                self.assertEqual(answer.content == b"", status == 304)

    def test_a_preflight_from_any_origin_is_answered_as_the_extension_asks(self) -> None:
        for path in [self.card_url, self.catalog_url]:
            with self.subTest(path=path):
                answer = httpx2.options(
                    path,
                    headers={
                        "Origin": EVIL,
                        "Access-Control-Request-Method": "GET",
                        "Access-Control-Request-Headers": "if-none-match",
                    },
                    timeout=30,
                )
                self.assertEqual(answer.status_code, 204)
                self.assertEqual(answer.headers["access-control-allow-origin"], "*")
                self.assertEqual(answer.headers["access-control-allow-methods"], "GET")
                self.assertEqual(answer.headers["access-control-allow-headers"], "Content-Type, If-None-Match")

    def test_head_answers_the_headers_alone(self) -> None:
        answer = httpx2.head(self.card_url, timeout=30)
        self.assertEqual(answer.status_code, 200)
        self.assertEqual(answer.content, b"")
        self.assertEqual(answer.headers["etag"], self.get(self.card_url).headers["etag"])

    def test_a_host_not_allowed_is_refused_as_on_mcp(self) -> None:
        for url in [self.card_url, self.catalog_url]:
            with self.subTest(url=url):
                self.assertEqual(httpx2.get(url, headers={"Host": "evil.example"}, timeout=30).status_code, 421)

    def test_no_method_but_get_reaches_anything_and_none_reaches_the_sdk(self) -> None:
        # The card is a route of its own: a JSON-RPC message posted to it, with or without a
        # token, is never handed to the SDK (nor answered before a token check by anything).
        token = self.token_for(self.make_user("alice"))
        for url in [self.card_url, self.catalog_url]:
            for sent_token in [None, token]:
                for method in ["POST", "PUT", "DELETE", "PATCH"]:
                    with self.subTest(url=url, method=method, token=bool(sent_token)):
                        headers = {"Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}
                        if sent_token:
                            headers["Authorization"] = f"Bearer {sent_token}"
                        body = json.dumps(rpc_body("tools/list")).encode()
                        answer = httpx2.request(method, url, content=body, headers=headers, timeout=30)
                        self.assertEqual(answer.status_code, 405)
                        self.assertEqual(set(answer.headers["allow"].split(", ")), {"GET", "HEAD", "OPTIONS"})
                        self.assertNotIn(b"field_notes", answer.content)
                        self.assertNotIn(b"jsonrpc", answer.content)

    def test_a_token_is_neither_needed_nor_looked_at(self) -> None:
        plain = self.get(self.card_url)
        with_token = self.get(self.card_url, Authorization="Bearer not-a-token")
        self.assertEqual((with_token.status_code, with_token.content), (plain.status_code, plain.content))

    def test_the_catalog_lists_the_card(self) -> None:
        answer = httpx2.get(self.catalog_url, timeout=30)
        self.assertEqual(answer.status_code, 200)
        self.assertEqual(answer.headers["content-type"], "application/ai-catalog+json")
        self.assertEqual(answer.headers["access-control-allow-origin"], "*")
        catalog = answer.json()
        Draft7Validator(AI_CATALOG).validate(catalog)
        [entry] = catalog["entries"]
        self.assertEqual(entry["url"], self.card_url)
        self.assertEqual(entry["identifier"], "urn:air:local:mcp:agent-codex")  # the live server is on 127.0.0.1
        self.assertEqual(self.get(entry["url"]).json()["name"], "local/agent-codex")
        etag = answer.headers["etag"]
        self.assertEqual(httpx2.get(self.catalog_url, headers={"If-None-Match": etag}, timeout=30).status_code, 304)


ACME = identity.Instance("https://codex.acme.org", "https://codex.acme.org/mcp")


class RegistryDocumentsTest(SimpleTestCase):
    def test_docs_server_json_is_generated_from_the_servers_identity(self) -> None:
        self.assertEqual(
            SERVER_JSON_PATH.read_text(),
            render(identity.server_json(identity.DOCUMENTED)),
            "docs/server.json is stale: run `python manage.py export_server_json --docs`",
        )

    def test_the_documented_instance_is_what_settings_make_of_its_public_url(self) -> None:
        example = public_url_settings(identity.DOCUMENTED.public_url)
        self.assertEqual(identity.DOCUMENTED.resource_url, example["CODEX_RESOURCE_URL"])

    def test_server_json_and_the_card_follow_their_published_rules(self) -> None:
        instances = [
            identity.DOCUMENTED,
            ACME,
            identity.Instance(
                "https://acme.org", "https://acme.org/mcp", "https://www.acme.org/codex", "org.acme/notes"
            ),
        ]
        for instance in instances:
            with self.subTest(instance=instance):
                Draft7Validator(SERVER_JSON).validate(identity.server_json(instance))
                Draft7Validator(SERVER_CARD).validate(identity.server_card(instance))
                Draft7Validator(AI_CATALOG).validate(identity.ai_catalog(instance))

    def test_every_face_shows_the_one_record(self) -> None:
        registry, card = identity.server_json(ACME), identity.server_card(ACME)
        for face in [registry, card]:
            self.assertEqual(
                {member: face[member] for member in ["title", "description", "version", "websiteUrl", "icons"]},
                {
                    "title": identity.TITLE,
                    "description": identity.DESCRIPTION,
                    "version": identity.VERSION,
                    "websiteUrl": "https://codex.acme.org/",
                    "icons": ACME.icons(),
                },
            )
            self.assertEqual(face["name"], "org.acme.codex/agent-codex")
        self.assertEqual(registry["remotes"], [{"type": "streamable-http", "url": "https://codex.acme.org/mcp"}])
        self.assertEqual(card["remotes"][0]["url"], "https://codex.acme.org/mcp")
        self.assertLessEqual(len(identity.DESCRIPTION), identity.DESCRIPTION_MAX_CHARS)
        self.assertNotIn("\n", identity.DESCRIPTION)

    def test_the_registry_name_comes_from_the_setting_or_the_public_host(self) -> None:
        for public_url, setting, name in [
            ("https://codex.acme.org", "", "org.acme.codex/agent-codex"),
            ("https://acme.org:8443", "", "org.acme/agent-codex"),
            ("https://codex.acme.org", "io.github.alice/agent-codex", "io.github.alice/agent-codex"),
            ("http://127.0.0.1:8000", "", "local/agent-codex"),
            ("http://[::1]:8000", "", "local/agent-codex"),
            ("http://localhost:8000", "", "local/agent-codex"),
        ]:
            with self.subTest(public_url=public_url, setting=setting):
                instance = identity.Instance(public_url, public_url + "/mcp", registry_name_setting=setting)
                self.assertEqual(instance.registry_name, name)

    @given(st.text(max_size=80))
    def test_a_derived_registry_name_is_always_a_valid_one(self, host: str) -> None:
        public_url = "https://" + host
        try:
            instance = identity.Instance(public_url, public_url + "/mcp")
            name = instance.registry_name
        except ValueError:
            return  # urlsplit refuses it (a bracket or a port that is no number): start-up refuses it too
        self.assertIsNone(identity.registry_name_problem(name), name)

    @given(st.text(max_size=200))
    def test_any_if_none_match_is_answered_without_fault(self, header: str) -> None:
        etag = '"0123456789abcdef0123456789abcdef"'
        self.assertIsInstance(discovery.not_modified(header, etag), bool)
        self.assertTrue(discovery.not_modified(f"{header}, {etag}", etag))

    def test_a_bad_registry_name_or_website_refuses_to_start(self) -> None:
        for overrides, words in [
            ({"CODEX_REGISTRY_NAME": "agent-codex"}, "CODEX_REGISTRY_NAME"),
            ({"CODEX_REGISTRY_NAME": "io.github.alice/agent codex"}, "CODEX_REGISTRY_NAME"),
            ({"CODEX_WEBSITE_URL": "javascript:alert(1)"}, "CODEX_WEBSITE_URL"),
            ({"CODEX_WEBSITE_URL": "/relative"}, "CODEX_WEBSITE_URL"),
        ]:
            with self.subTest(overrides=overrides), override_settings(**overrides):
                self.assertIn(words, configuration_problem() or "")
        with override_settings(CODEX_REGISTRY_NAME="io.github.alice/agent-codex", CODEX_WEBSITE_URL="https://a.org/"):
            self.assertIsNone(configuration_problem())

    def test_export_server_json_prints_this_instances_document(self) -> None:
        with override_settings(**public_url_settings("https://codex.acme.org"), CODEX_REGISTRY_NAME="org.acme/codex"):
            out = StringIO()
            call_command("export_server_json", stdout=out)
        document = json.loads(out.getvalue())
        self.assertEqual(document["name"], "org.acme/codex")
        self.assertEqual(document["remotes"], [{"type": "streamable-http", "url": "https://codex.acme.org/mcp"}])
        self.assertEqual(document["icons"][0]["src"], "https://codex.acme.org/static/codex/icon.svg")

    def test_export_server_json_checks_the_docs_copy(self) -> None:
        checked = subprocess.run(
            [sys.executable, "manage.py", "export_server_json", "--docs", "--check"],
            cwd=settings.BASE_DIR,
            env={"PATH": "/usr/bin:/bin", "DJANGO_DEBUG": "1", "SECRET_KEY": "x" * 50},
            capture_output=True,
            text=True,
        )
        self.assertEqual(checked.returncode, 0, checked.stderr)
