"""The seam of ``mcp_endpoint.exchange`` changes no byte: the same requests, sent to the live
server with the fast path on (a tool call through the server's middleware, any other message
through the SDK's kernel, the answer written once, a tool result handed on as served) and off
(the SDK's transport and its result validation), get the same status, content type and body, in
every protocol version, for every tool and every error form: notebook errors, schema
violations, protocol errors (-32602), an unknown tool, an unknown method, a handshake, a
notification and the answers of a batch."""

import asyncio
import json
from types import SimpleNamespace
from typing import Any
from unittest import mock

from django.test import SimpleTestCase, override_settings
from hypothesis import given
from hypothesis import settings as examples
from hypothesis import strategies as st
from mcp.server import runner

from mcp_endpoint.exchange import Exchange, ServedToolResults, json_written
from mcp_endpoint.server import create_server
from notebook.limits import MAX_ARGUMENT_MEMBERS
from tests.http_client import MODERN, OLDEST, post, rpc_body
from tests.live import LiveServerTestCase

SAVE, GET, SEARCH, UPDATE = "field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"
VERSIONS = (MODERN, "2025-11-25", "2025-06-18", OLDEST, None)
NOTE = {
    "content": 'A note with "quotes", a \\ backslash, é, ﬁ, \u2028 and an emoji \U0001f9ed',
    "title": "Straße",
    "tags": ["field", "émigré"],
    "relatedAgentIds": ["agent-1"],
    "provenance": {"source": {"n": [1, 2.5, None, True, 2**70]}, "empty": {}},
}


class SameBytesEitherWayTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.token = self.token_for(self.alice)
        self.reader = self.token_for(self.alice, scopes=("notes:read",))
        saved = self.call(SAVE, {"requestId": "seed", "entry": NOTE}, version=MODERN).json()
        self.entry_id = saved["result"]["structuredContent"]["entry"]["id"]

    def call(self, name: str, arguments: Any, *, version: str | None, token: str | None = None, request_id=1):
        body = rpc_body("tools/call", {"name": name, "arguments": arguments}, version=version or OLDEST)
        body["id"] = request_id
        return post(self.mcp_url, body, token=token or self.token, version=version)

    def tool_calls(self) -> list[tuple[str, Any, dict]]:
        """(tool, arguments, options): a success of each tool that answers the same each time, and
        each error form a call can get."""
        missing = "3f1c2a8e-4b5d-4e6f-8a9b-0c1d2e3f4a5b"
        too_many = {"requestId": "r", "entry": {"content": "x", "tags": ["t"] * (MAX_ARGUMENT_MEMBERS + 1)}}
        return [
            (GET, {"id": self.entry_id}, {}),
            (SEARCH, {"tag": "field"}, {}),
            (SEARCH, {"query": "straße"}, {}),
            (SAVE, {"requestId": "seed", "entry": NOTE}, {}),  # a replay: the same entry
            (GET, {"id": missing}, {}),  # not_found
            (UPDATE, {"id": self.entry_id, "expectedRevision": 7, "entry": {"content": "x"}}, {}),  # conflict
            (SAVE, {"requestId": "seed", "entry": {"content": "other"}}, {}),  # conflict
            (GET, {"id": "not-a-uuid"}, {}),  # a schema violation
            (SAVE, {"requestId": 5}, {}),  # a schema violation
            (SEARCH, {"cursor": "forged"}, {}),  # invalid_argument from a rule
            (SAVE, {"requestId": "w", "entry": {"content": "x"}}, {"token": self.reader}),  # 403
            ("no_such_tool", {}, {}),  # -32602 unknown tool
            (SAVE, too_many, {}),  # -32602 argument tree too large
            (SEARCH, {}, {"request_id": "a string id"}),
            (GET, {"id": self.entry_id}, {"request_id": 2**53}),
        ]

    def other_messages(self, version: str | None) -> list[Any]:
        era = version or OLDEST
        messages: list[Any] = [
            rpc_body("tools/list", version=era),
            rpc_body("ping", version=era),
            rpc_body("no/such/method", version=era),  # -32601
            rpc_body("tools/call", {"arguments": {}}, version=era),  # -32602: no name
            rpc_body("tools/call", {"name": GET, "arguments": [1]}, version=era),  # -32602: arguments not an object
            {**rpc_body("tools/call", {"name": GET, "arguments": {}}, version=era), "jsonrpc": "1.0"},  # -32600
            {**rpc_body("tools/call", {"name": GET, "arguments": {}}, version=era), "id": 1.5},  # -32600
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ]
        if version == MODERN:
            messages.append(rpc_body("server/discover", version=era))
        else:
            initialize = {"protocolVersion": era, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            messages.append(rpc_body("initialize", initialize, version=era))
        if version in (OLDEST, None):
            batch = [
                rpc_body("tools/call", {"name": GET, "arguments": {"id": self.entry_id}}, request_id=1),
                rpc_body("tools/call", {"name": "no_such_tool", "arguments": {}}, request_id=2),
                rpc_body("tools/call", {"name": GET, "arguments": {"id": 5}}, request_id=3),
                rpc_body("tools/list", request_id=4),
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
            ]
            messages.append(batch)
        return messages

    def answers(self) -> list[tuple[str, int, str, bytes]]:
        found = []
        for version in VERSIONS:
            call = rpc_body("tools/call", {"name": GET, "arguments": {"id": self.entry_id}}, version=version or OLDEST)
            for headers in ({"Content-Type": "text/plain"}, {"Accept": "text/event-stream"}, {"Accept": "*/*"}):
                response = post(self.mcp_url, call, token=self.token, version=version, headers=headers)
                found.append((f"{version} {headers}", response))
            for name, arguments, options in self.tool_calls():
                response = self.call(name, arguments, version=version, **options)
                found.append((f"{version} {name} {arguments}", response))
            for message in self.other_messages(version):
                if isinstance(message, dict) and "name" not in (message.get("params") or {"name": 1}):
                    # No name to put in Mcp-Name (the client would send only Mcp-Method).
                    headers = {"Mcp-Method": message["method"]} if version == MODERN else {}
                    content = json.dumps(message).encode()
                    response = post(self.mcp_url, token=self.token, version=version, headers=headers, content=content)
                else:
                    response = post(self.mcp_url, message, token=self.token, version=version)
                found.append((f"{version} {message}", response))
        return [(name, r.status_code, r.headers.get("content-type", ""), r.content) for name, r in found]

    def test_every_answer_is_the_same_bytes_with_the_seam_and_without(self) -> None:
        # (An update's success is another revision each time, so not in the table; it is written
        # by the same code as a get's.)
        kernel = mock.Mock(wraps=runner.serve_one)
        with (
            mock.patch("mcp_endpoint.exchange.serve_one", kernel),
            mock.patch.object(Exchange, "tool_call", autospec=True, side_effect=Exchange.tool_call) as tool_calls,
        ):
            with override_settings(CODEX_FAST_PATH=True):
                with_seam = self.answers()
            served_by_the_seam = (kernel.call_count, tool_calls.call_count)
            with override_settings(CODEX_FAST_PATH=False):
                without = self.answers()
        # The control went through the SDK's transport.
        self.assertEqual((kernel.call_count, tool_calls.call_count), served_by_the_seam)
        # Every tool call of the table went the fast lane's way (each a tool_call), the other
        # requests through the kernel.
        self.assertGreaterEqual(served_by_the_seam[1], len(VERSIONS) * len(self.tool_calls()))
        self.assertGreaterEqual(served_by_the_seam[0], len(VERSIONS) * 2)
        statuses = set()
        for (name, *seam), (_, *plain) in zip(with_seam, without, strict=True):
            with self.subTest(name):
                self.assertEqual(seam, plain)
                statuses.add(seam[0])
        self.assertTrue({200, 202, 400, 403, 404} <= statuses, statuses)


@override_settings(CODEX_FAST_PATH=True)  # the seam serves only then
class ServedToolResultsTest(SimpleTestCase):
    """The middleware answers tools/call requests only: the kernel's middleware sees
    notifications too, and a tools/call sent as a notification asks for nothing."""

    def run_middleware(self, request_id) -> tuple[list[str], Any]:
        called: list[str] = []

        async def handler(ctx, params):
            called.append("handler")
            return {"content": [], "isError": False}

        async def call_next(ctx):
            called.append("kernel")

        middleware = ServedToolResults(create_server(), handler)
        ctx = SimpleNamespace(
            method="tools/call",
            request_id=request_id,
            protocol_version=OLDEST,
            params={"name": GET, "arguments": {}},
        )
        return called, asyncio.run(middleware(ctx, call_next))

    def test_a_notification_goes_to_the_kernel_and_never_to_the_handler(self) -> None:
        called, _result = self.run_middleware(None)
        self.assertEqual(called, ["kernel"])

    def test_a_request_goes_to_the_handler(self) -> None:
        called, result = self.run_middleware(7)
        self.assertEqual((called, result), (["handler"], {"content": [], "isError": False}))


# Any value an answer could hold, and what only the json module writes: every character (lone
# surrogates, U+007F, past U+FFFF), integers past 64 bits, floats (NaN and infinities too),
# keys that are not strings, tuples.
_text = st.text(alphabet=st.characters(codec=None), max_size=12)
_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.integers(min_value=-(2**64), max_value=2**64)
    | st.floats()
    | _text,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.dictionaries(_text, children, max_size=5)
        | st.dictionaries(st.integers() | st.booleans() | st.none(), children, max_size=2)
    ),
    max_leaves=30,
)


class AnswerBytesTest(SimpleTestCase):
    """The answer's writer (``exchange.json_written``) gives the json module's bytes for any value."""

    @examples(max_examples=1000, deadline=None)
    @given(value=_values)
    def test_it_writes_what_the_json_module_writes_for_any_value(self, value: Any) -> None:
        self.assertEqual(json_written(value), json.dumps(value, separators=(",", ":")).encode())

    def test_it_writes_the_characters_the_two_writers_spell_otherwise_as_the_json_module_does(self) -> None:
        for value in ["\x7f", "é", "\u2028", "\U0001f9ed", "\ud800", 1e-05, float("nan"), 2**64, {1: "a"}]:
            with self.subTest(value=value):
                self.assertEqual(json_written({"v": value}), json.dumps({"v": value}, separators=(",", ":")).encode())
