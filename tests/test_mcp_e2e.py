"""End to end: uvicorn on 127.0.0.1, the official SDK client over real HTTP, both protocol eras."""

from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_endpoint.tools import TOOLS
from tests.live import LiveServerTestCase
from tests.mcp_client import error_of, success_of, with_client

MODES = ["auto", "legacy"]


class McpEndToEndTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.bob = self.make_user("bob")
        self.alice_token = self.token_for(self.alice)
        self.bob_token = self.token_for(self.bob)

    def test_handshake_identity_and_tool_listing(self) -> None:
        for mode, version in [("auto", "2026-07-28"), ("legacy", "2025-11-25")]:

            async def work(client: Client):
                return client.protocol_version, client.server_info, await client.list_tools()

            with self.subTest(mode=mode):
                protocol, info, listing = with_client(self.mcp_url, self.alice_token, mode, work)
                self.assertEqual(protocol, version)
                self.assertEqual((info.name, info.title, info.version), ("agent-codex", "Agent Codex", "0.1.0"))
                self.assertEqual([t.name for t in listing.tools], [t.name for t in TOOLS])
                save = listing.tools[0]
                self.assertEqual(save.input_schema, TOOLS[0].input_schema)
                self.assertEqual(save.output_schema, TOOLS[0].output_schema)
                self.assertTrue(save.annotations.idempotent_hint)
                self.assertFalse(save.annotations.destructive_hint)

    def test_the_four_tools_work_in_both_eras(self) -> None:
        for mode in MODES:
            with self.subTest(mode=mode):
                self._exercise_tools(mode)

    def _exercise_tools(self, mode: str) -> None:
        async def work(client: Client) -> None:
            await client.list_tools()  # lets the client validate structuredContent against outputSchema
            entry = {"content": f"Rollback plan ({mode})", "title": "Launch", "tags": ["launch", mode]}
            saved = success_of(await client.call_tool("field_notes_save", {"requestId": f"r-{mode}", "entry": entry}))
            entry_id = saved["entry"]["id"]
            self.assertEqual(saved["entry"]["revision"], 1)

            replay = success_of(await client.call_tool("field_notes_save", {"requestId": f"r-{mode}", "entry": entry}))
            self.assertEqual(replay["entry"]["id"], entry_id)

            reused = await client.call_tool(
                "field_notes_save", {"requestId": f"r-{mode}", "entry": {"content": "different"}}
            )
            self.assertEqual(error_of(reused)["code"], "conflict")

            got = success_of(await client.call_tool("field_notes_get", {"id": entry_id}))
            self.assertEqual(got["entry"]["content"], entry["content"])

            for other in range(5):
                await client.call_tool(
                    "field_notes_save",
                    {"requestId": f"o-{mode}-{other}", "entry": {"content": f"other {other}", "tags": [mode]}},
                )

            by_query = success_of(await client.call_tool("field_notes_search", {"query": "ROLLBACK PLAN"}))
            self.assertIn(entry_id, [e["id"] for e in by_query["entries"]])
            by_tag = success_of(await client.call_tool("field_notes_search", {"tag": "launch"}))
            self.assertIn(entry_id, [e["id"] for e in by_tag["entries"]])
            self.assertEqual(by_tag["coverage"]["mode"], "literal-substring-v1")

            seen, cursor = [], None
            while True:
                args = {"tag": mode, "limit": 2} | ({"cursor": cursor} if cursor else {})
                page = success_of(await client.call_tool("field_notes_search", args))
                seen += [e["id"] for e in page["entries"]]
                if not page["coverage"]["hasMore"]:
                    self.assertNotIn("nextCursor", page)
                    break
                cursor = page["nextCursor"]
            self.assertEqual(len(seen), 6)
            self.assertEqual(seen, sorted(seen))

            bad_cursor = await client.call_tool("field_notes_search", {"tag": "launch", "cursor": cursor or "x" * 10})
            self.assertEqual(error_of(bad_cursor)["code"], "invalid_argument")

            updated = success_of(
                await client.call_tool(
                    "field_notes_update", {"id": entry_id, "expectedRevision": 1, "entry": {"content": "v2"}}
                )
            )
            self.assertEqual(updated["entry"]["revision"], 2)
            self.assertNotIn("title", updated["entry"])
            self.assertEqual(updated["entry"]["createdAt"], saved["entry"]["createdAt"])

            stale = await client.call_tool(
                "field_notes_update", {"id": entry_id, "expectedRevision": 1, "entry": {"content": "v3"}}
            )
            conflict = error_of(stale)
            self.assertEqual(conflict["code"], "conflict")
            self.assertIn("revision 2", conflict["message"])

            replay_after_update = success_of(
                await client.call_tool("field_notes_save", {"requestId": f"r-{mode}", "entry": entry})
            )
            self.assertEqual(replay_after_update["entry"]["revision"], 2)

            with self.assertRaises(MCPError) as caught:
                await client.call_tool("field_notes_delete", {"id": entry_id})
            self.assertEqual(caught.exception.code, -32602)

        with_client(self.mcp_url, self.alice_token, mode, work)

    def test_alices_entries_are_invisible_to_bob(self) -> None:
        async def alice_saves(client: Client) -> str:
            result = await client.call_tool(
                "field_notes_save", {"requestId": "a1", "entry": {"content": "alice's secret", "tags": ["private"]}}
            )
            return success_of(result)["entry"]["id"]

        entry_id = with_client(self.mcp_url, self.alice_token, "auto", alice_saves)

        for mode in MODES:

            async def bob_looks(client: Client):
                get = await client.call_tool("field_notes_get", {"id": entry_id})
                missing = await client.call_tool("field_notes_get", {"id": "11111111-1111-4111-8111-111111111111"})
                update = await client.call_tool(
                    "field_notes_update", {"id": entry_id, "expectedRevision": 1, "entry": {"content": "bob"}}
                )
                search = await client.call_tool("field_notes_search", {"query": "secret"})
                browse = await client.call_tool("field_notes_search", {})
                by_tag = await client.call_tool("field_notes_search", {"tag": "private"})
                return get, missing, update, search, browse, by_tag

            with self.subTest(mode=mode):
                get, missing, update, search, browse, by_tag = with_client(
                    self.mcp_url, self.bob_token, mode, bob_looks
                )
                self.assertEqual(error_of(get), error_of(missing))
                self.assertEqual(error_of(get)["code"], "not_found")
                self.assertEqual(error_of(update), error_of(missing))
                for page in (search, browse, by_tag):
                    self.assertEqual(success_of(page)["entries"], [])

        async def alice_gets(client: Client):
            return success_of(await client.call_tool("field_notes_get", {"id": entry_id}))

        self.assertEqual(with_client(self.mcp_url, self.alice_token, "auto", alice_gets)["entry"]["revision"], 1)
