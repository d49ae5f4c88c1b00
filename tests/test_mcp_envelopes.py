"""``envelope_problem`` judges a message as the SDK's adapter does: its shortcut for a plain
request (told by its members' types, without pydantic) never calls a message good that the
adapter refuses, and the adapter's verdict stands for everything else."""

from django.test import SimpleTestCase
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

from mcp_endpoint import envelopes

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
# Messages near a request's shape: each member present or not, of the right type or another.
MEMBERS = {
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2.0, None]) | JSON,
    "id": st.integers() | st.text(max_size=4) | st.booleans() | st.floats(allow_nan=False) | st.none() | JSON,
    "method": st.sampled_from(["tools/call", "tools/list", ""]) | JSON,
    "params": st.dictionaries(st.text(max_size=6), JSON, max_size=3) | JSON,
    "result": JSON,
    "error": JSON,
}
MESSAGES = st.fixed_dictionaries({}, optional=MEMBERS) | JSON


def adapter_takes(message) -> bool:
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return False
    return True


class EnvelopeShortcutTest(SimpleTestCase):
    @settings(max_examples=1500, deadline=None)
    @given(message=MESSAGES)
    def test_the_shortcut_and_the_adapter_agree(self, message) -> None:
        if envelopes._plainly_a_request(message):
            self.assertTrue(adapter_takes(message), message)
        self.assertEqual(envelopes.envelope_problem(message) is None, adapter_takes(message), message)

    def test_the_shortcut_takes_what_clients_send(self) -> None:
        for request_id in (1, 0, -5, 2**80, "abc", ""):
            message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": "x"}}
            self.assertTrue(envelopes._plainly_a_request(message))
        for leaves_it_to_the_adapter in (
            {"jsonrpc": "2.0", "id": True, "method": "tools/call"},
            {"jsonrpc": "2.0", "id": 1.0, "method": "tools/call"},
            {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
        ):
            self.assertFalse(envelopes._plainly_a_request(leaves_it_to_the_adapter))
