"""The guard's header lookup (``mcp_endpoint.http.request_headers``) reads as Starlette's does."""

from django.test import SimpleTestCase
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers

from mcp_endpoint.http import request_headers

NAMES = st.sampled_from(["authorization", "host", "origin", "mcp-method", "mcp-name", "x-other"])
VALUES = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=12)


class RequestHeadersTest(SimpleTestCase):
    def test_the_first_of_a_repeated_header_wins(self) -> None:
        scope = {"headers": [(b"authorization", b"Bearer first"), (b"authorization", b"Bearer second")]}
        self.assertEqual(request_headers(scope)["authorization"], "Bearer first")

    @settings(max_examples=200, deadline=None)
    @given(pairs=st.lists(st.tuples(NAMES, VALUES), max_size=8), asked=NAMES)
    def test_every_lookup_answers_as_starlettes_headers(self, pairs: list, asked: str) -> None:
        scope = {
            "type": "http",
            "headers": [(name.encode("latin-1"), value.encode("latin-1")) for name, value in pairs],
        }
        self.assertEqual(request_headers(scope).get(asked), Headers(scope=scope).get(asked))
