"""Contract 8: every message to /mcp is answered only after its token was checked, whatever its
headers, body or HTTP method say. A table of every protocol version, method, body and
``Mcp-Method``/``Mcp-Name`` combination (matching the body, or forged) is sent with a made-up
token, and with none; each gets the 401 challenge and nothing is written."""

import itertools
import json
from typing import Any
from unittest import mock

import httpx2
from mcp.server.runner import ServerRunner

from authserver.core import token_check
from mcp_endpoint.batches import MAX_BATCH_MESSAGES
from notebook.models import Entry
from tests.http_client import MODERN, OLDEST, rpc_body
from tests.live import LiveServerTestCase

SAVE = "field_notes_save"
SAVE_ARGS = {"requestId": "forged", "entry": {"content": "written without a token"}}

# Every served version, a request without the header (2025-03-26's clients send none), and one
# the server does not serve.
VERSIONS = ("2026-07-28", "2025-11-25", "2025-06-18", OLDEST, None, "1999-01-01")
METHODS = ("GET", "POST", "DELETE")
# The other methods, each with the bodies and headers a client of the version would send.
OTHER_METHODS = ("PUT", "PATCH", "HEAD", "OPTIONS")


def _bodies(version: str | None) -> dict[str, Any]:
    era = version if version in (MODERN, "2025-11-25", "2025-06-18") else OLDEST
    initialize = {
        "protocolVersion": era,
        "capabilities": {},
        "clientInfo": {"name": "table-test", "version": "1"},
    }
    return {
        "tools/list": rpc_body("tools/list", version=era),
        "ping": rpc_body("ping", version=era),
        "initialize": rpc_body("initialize", initialize, version=era),
        "notification": {"jsonrpc": "2.0", "method": "notifications/initialized"},
        "batch": [rpc_body("tools/list", version=era, request_id=1), rpc_body("ping", version=era, request_id=2)],
        "tools/call": rpc_body("tools/call", {"name": SAVE, "arguments": SAVE_ARGS}, version=era),
    }


def _header_combinations(body: Any) -> dict[str, dict[str, str]]:
    """The ``Mcp-Method``/``Mcp-Name`` headers sent with ``body``: none, the body's own, and
    forged ones naming a call of a known tool (the shortcut item 8 of issue 42 found), a
    call of an unknown one, and another method."""
    method = body.get("method", "") if isinstance(body, dict) else ""
    matching = {"Mcp-Method": method} if method else {}
    if method == "tools/call":
        matching["Mcp-Name"] = body["params"]["name"]
    return {
        "none": {},
        "matching": matching,
        "forged tools/call": {"Mcp-Method": "tools/call", "Mcp-Name": "field_notes_get"},
        "forged unknown tool": {"Mcp-Method": "tools/call", "Mcp-Name": "no_such_tool"},
        "forged tools/list": {"Mcp-Method": "tools/list"},
    }


def _request(version: str | None, extra: dict[str, str]) -> dict[str, str]:
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    return headers | extra


def table() -> list[tuple[str | None, str, str, str, dict[str, str], bytes]]:
    """Every (version, method, body name, header combination, headers, body) to send: every
    header combination with GET, POST and DELETE, the matching headers with the other methods."""
    rows = []
    for version, method in itertools.product(VERSIONS, METHODS + OTHER_METHODS):
        for body_name, body in _bodies(version).items():
            for combination, extra in _header_combinations(body).items():
                if method in OTHER_METHODS and combination != "matching":
                    continue
                content = json.dumps(body).encode()
                rows.append((version, method, body_name, combination, _request(version, extra), content))
    return rows


class EveryMessageIsCheckedTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.prm_url = self.live.base_url + "/.well-known/oauth-protected-resource/mcp"

    def send(self, rows, authorization: dict[str, str]):
        """Each row, sent with ``authorization``: (the row's name, the response)."""
        with httpx2.Client(timeout=30) as client:
            for version, method, body_name, combination, headers, body in rows:
                name = f"{version} {method} {body_name} headers={combination}"
                yield name, client.request(method, self.mcp_url, content=body, headers={**headers, **authorization})

    def test_a_made_up_token_gets_401_for_every_message_method_and_header(self) -> None:
        tail = f'resource_metadata="{self.prm_url}", scope="notes:read notes:write"'
        for name, response in self.send(table(), {"Authorization": "Bearer made-up-token"}):
            with self.subTest(name):
                self.assertEqual(response.status_code, 401, response.text)
                challenge = response.headers.get("www-authenticate", "")
                self.assertTrue(challenge.startswith('Bearer error="invalid_token"'), challenge)
                self.assertTrue(challenge.endswith(tail), challenge)
        self.assertFalse(Entry.objects.exists())

    def test_no_token_gets_the_challenge_whatever_the_method_and_version(self) -> None:
        expected = f'Bearer resource_metadata="{self.prm_url}", scope="notes:read notes:write"'
        # A tools/list with a forged tools/call's headers, in each version, with every method.
        posted = [row for row in table() if row[1:4] == ("POST", "tools/list", "forged tools/call")]
        rows = [(version, method, *rest) for version, _post, *rest in posted for method in METHODS + OTHER_METHODS]
        for name, response in self.send(rows, {}):
            with self.subTest(name):
                self.assertEqual(response.status_code, 401, response.text)
                self.assertEqual(response.headers.get("www-authenticate"), expected)
        self.assertFalse(Entry.objects.exists())

    def test_a_valid_token_is_answered_past_the_check_in_every_row(self) -> None:
        # The control: the same rows with a real token are answered by what lies past the
        # check (the SDK, a version error, the 405 of any method but POST), so the 401s above
        # are the token's.
        token = self.token_for(self.make_user("alice"))
        statuses = set()
        for name, response in self.send(table(), {"Authorization": f"Bearer {token}"}):
            with self.subTest(name):
                self.assertNotIn(response.status_code, (401, 403, 500), response.text)
                statuses.add(response.status_code)
        self.assertTrue({200, 202, 400, 405} <= statuses, statuses)


class GetTest(LiveServerTestCase):
    """mcp-use 1.7.1 discovers OAuth with a GET /mcp and reads the scopes from a 401's challenge."""

    def test_a_get_without_a_token_gets_the_challenge_with_the_scopes(self) -> None:
        response = httpx2.get(self.mcp_url, headers={"Accept": "text/event-stream"})
        self.assertEqual(response.status_code, 401, response.text)
        self.assertIn('scope="notes:read notes:write"', response.headers["www-authenticate"])

    def test_only_an_authenticated_get_learns_that_no_stream_is_offered(self) -> None:
        token = self.token_for(self.make_user("alice"))
        response = httpx2.get(self.mcp_url, headers={"Accept": "text/event-stream", "Authorization": f"Bearer {token}"})
        self.assertEqual(response.status_code, 405, response.text)
        self.assertEqual(response.headers["allow"], "POST")
        self.assertNotIn("www-authenticate", response.headers)


class BatchLimitsTest(LiveServerTestCase):
    def test_a_batch_with_a_made_up_token_is_refused_whole_before_any_message_reaches_the_sdk(self) -> None:
        # A 2025-03-26 batch of the most messages a batch may hold: the token is checked once, and
        # no message is handed to the SDK's dispatch (its requests and notifications alike).
        calls = [
            rpc_body("tools/call", {"name": SAVE, "arguments": {**SAVE_ARGS, "requestId": f"r{n}"}}, request_id=n)
            for n in range(MAX_BATCH_MESSAGES - 3)
        ]
        notification = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        batch = [*calls, rpc_body("tools/list", request_id=-1), rpc_body("ping", request_id=-2), notification]
        self.assertEqual(len(batch), MAX_BATCH_MESSAGES)
        for version in (OLDEST, None):
            headers = {"Authorization": "Bearer made-up-token", "Content-Type": "application/json"}
            if version is not None:
                headers["MCP-Protocol-Version"] = version
            with (
                self.subTest(version=version),
                mock.patch.object(ServerRunner, "_on_request", autospec=True) as requests,
                mock.patch.object(ServerRunner, "_on_notify", autospec=True) as notifications,
                mock.patch.object(token_check, "check_access_token", wraps=token_check.check_access_token) as checks,
            ):
                response = httpx2.post(self.mcp_url, content=json.dumps(batch).encode(), headers=headers)
                self.assertEqual(response.status_code, 401, response.text)
                self.assertEqual((requests.call_count, notifications.call_count), (0, 0))
                self.assertEqual(checks.call_count, 1)
        self.assertFalse(Entry.objects.exists())

    def test_a_batch_too_large_to_serve_is_still_refused_only_after_the_check(self) -> None:
        batch = [rpc_body("ping", request_id=n) for n in range(MAX_BATCH_MESSAGES + 1)]
        headers = {"Authorization": "Bearer made-up-token", "Content-Type": "application/json"}
        response = httpx2.post(self.mcp_url, content=json.dumps(batch).encode(), headers=headers)
        self.assertEqual(response.status_code, 401, response.text)
