"""JSON-RPC envelopes the SDK would refuse with a validation dump.

The SDK (mcp 2.3.0) validates a POST's body with pydantic (``jsonrpc_message_adapter``) and
answers a body it refuses with -32602 and pydantic's report as the message ("4 validation
errors for union[JSONRPCRequest, ...]", input echoes and links to pydantic's site): nothing a
client author can act on. ``envelope_problem`` says instead, in one sentence, why a message is
not a JSON-RPC 2.0 request, notification or response. The SDK's own adapter judges, so the two
never disagree; only the words are ours. The guard answers such a message with -32600 Invalid
Request and them (``error_response``), in every protocol version.
"""

import json
from typing import Any

from mcp_types import INVALID_REQUEST, jsonrpc_message_adapter
from pydantic import ValidationError
from starlette.responses import JSONResponse, Response


def request_id(message: Any) -> Any:
    """The message's id when it is one JSON-RPC allows (a string or an integer), else None."""
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def _why(message: Any) -> str:
    """Why ``message``, which the SDK's adapter refused, is not JSON-RPC: the first rule it breaks."""
    if not isinstance(message, dict):
        return "A JSON-RPC message must be a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'A JSON-RPC message must have "jsonrpc": "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return 'A request\'s "method" must be a string'
        if message.get("params") is not None and not isinstance(message["params"], dict):
            return 'A request\'s "params" must be an object (MCP passes parameters by name)'
        return 'A request\'s "id" must be a string or an integer (or absent, for a notification)'
    if "result" in message or "error" in message:
        if "result" in message and request_id(message) is None:
            return 'A response\'s "id" must be the string or integer of the request it answers'
        if "result" in message:
            return 'A response\'s "result" must be an object'
        return 'An error response\'s "error" must be an object with an integer "code" and a string "message"'
    return 'A JSON-RPC message needs a "method" (a request or notification), or a "result" or "error" (a response)'


def _plainly_a_request(message: Any) -> bool:
    """A request the SDK's adapter takes, told by its members' types alone: every message this
    says yes to validates as the adapter's ``JSONRPCRequest`` (which ignores other members), so
    the common case skips pydantic; anything else is for the adapter to judge."""
    if type(message) is not dict or message.get("jsonrpc") != "2.0":
        return False
    params = message.get("params")
    return (
        type(message.get("id")) in (int, str)
        and type(message.get("method")) is str
        and (params is None or type(params) is dict)
    )


def envelope_problem(message: Any) -> str | None:
    """Why ``message`` is not a JSON-RPC 2.0 message the SDK takes, or None if it is one."""
    if _plainly_a_request(message):
        return None
    try:
        jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:
        return _why(message)
    return None


def error_response(message_id: Any, text: str, *, status: int = 400) -> Response:
    error = {"code": INVALID_REQUEST, "message": text}
    return JSONResponse({"jsonrpc": "2.0", "id": message_id, "error": error}, status_code=status)


def error_body(message_id: Any, text: str) -> bytes:
    """An Invalid Request error, as JSON: one answer of a batch."""
    error = {"code": INVALID_REQUEST, "message": text}
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "error": error}).encode()
