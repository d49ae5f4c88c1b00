"""Tool results are returned to the SDK as wire-form dicts, in each protocol version the very
form the SDK's own CallToolResult model takes on the wire there: its per-version result schema
(``serialize_server_result``, which the seam of ``mcp_endpoint.exchange`` spares) gives them
back unchanged."""

import json

import mcp_types as types
from django.test import SimpleTestCase
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp.server.runner import _dump_result
from mcp_types.methods import serialize_server_result

from mcp_endpoint.results import error_result, json_text, text_result
from mcp_endpoint.versions import SUPPORTED_VERSIONS, structured
from notebook.exceptions import NotFound

PAYLOAD = {
    "entry": {
        "id": "3f1c2a8e-4b5d-4e6f-8a9b-0c1d2e3f4a5b",
        "revision": 2,
        "title": "Straße ﬁle İ",
        "content": 'quotes " and \\ and \n and \u2028',
        "tags": ["a", "b"],
        "relatedAgentIds": [],
        "provenance": {"nested": [1, 2.5, None, True, {"deep": "x"}], "empty": {}},
        "createdAt": "2026-11-30T12:00:00.000Z",
        "updatedAt": "2026-11-30T12:00:01.000Z",
    }
}


def _as_model(payload: dict, *, is_error: bool) -> types.CallToolResult:
    """The result as the SDK's model, the way the handler returned it before."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=None if is_error else payload,
        is_error=is_error,
    )


class WireResultTest(SimpleTestCase):
    def assert_served_as_the_sdk_serves_its_model(self, payload: dict, *, is_error: bool) -> None:
        for version in SUPPORTED_VERSIONS:
            with self.subTest(version=version):
                ours = (
                    error_result(NotFound(payload["error"]["message"]), version)
                    if is_error
                    else text_result(payload, is_error=False, version=version)
                )
                model = _as_model(payload, is_error=is_error)
                if not structured(version):
                    model.structured_content = None  # the handler leaves it out in 2025-03-26
                served = serialize_server_result("tools/call", version, _dump_result(model))
                # The same members in the same order (json.dumps keeps the order: the bytes).
                self.assertEqual(json.dumps(ours), json.dumps(served))
                self.assertEqual(json.dumps(serialize_server_result("tools/call", version, ours)), json.dumps(ours))

    def test_a_success_is_served_as_the_sdk_serves_its_model(self) -> None:
        self.assert_served_as_the_sdk_serves_its_model(PAYLOAD, is_error=False)
        ours = text_result(PAYLOAD, is_error=False)
        self.assertEqual(json.loads(ours["content"][0]["text"]), ours["structuredContent"])

    def test_an_error_is_served_as_the_sdk_serves_its_model(self) -> None:
        payload = {"error": {"code": "not_found", "message": "no entry with this id exists in your codex"}}
        self.assert_served_as_the_sdk_serves_its_model(payload, is_error=True)
        self.assertNotIn("structuredContent", error_result(NotFound("x")))


JSON_WITHOUT_FLOATS = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


class JsonTextTest(SimpleTestCase):
    @settings(max_examples=200, deadline=None)
    @given(payload=st.dictionaries(st.text(max_size=8), JSON_WITHOUT_FLOATS, max_size=4))
    def test_the_text_is_what_the_json_module_writes(self, payload: dict) -> None:
        self.assertEqual(json_text(payload), json.dumps(payload, ensure_ascii=False, separators=(",", ":")))

    @settings(max_examples=100, deadline=None)
    @given(number=st.floats(allow_nan=False, allow_infinity=False))
    def test_floats_keep_their_value(self, number: float) -> None:
        self.assertEqual(json.loads(json_text({"n": number})), {"n": number})

    def test_what_orjson_refuses_is_written_by_the_json_module(self) -> None:
        for payload in [{"big": 2**64}, {"lone": "\ud800"}]:
            self.assertEqual(json_text(payload), json.dumps(payload, ensure_ascii=False, separators=(",", ":")))
