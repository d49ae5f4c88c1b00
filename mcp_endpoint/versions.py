"""The MCP protocol versions this server serves, and the answer for any other.

The SDK (mcp 2.3.0) would accept more than we test and document: its
``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS`` also holds 2024-11-05 and 2025-03-26.
And it routes any ``MCP-Protocol-Version`` header it does not know to its 2026-07-28 path
(``StreamableHTTPSessionManager._handle_request``), whose validation ladder
(``mcp.shared.inbound.classify_inbound_request``) complains about a missing
``params._meta`` before it ever looks at the version. So the guard decides first:

- a request whose ``MCP-Protocol-Version`` header is not one of ``SUPPORTED_VERSIONS``
  gets HTTP 400 with a JSON-RPC ``-32022`` error listing the supported versions, in the
  SDK's own ``UnsupportedProtocolVersionErrorData`` shape;
- an ``initialize`` asking for a handshake version we do not serve is answered, as the
  specification asks, with our newest handshake version (the client then continues or
  disconnects): the request is passed on with that version in place of the one asked for.

Requests without the header are left to the SDK, which serves them as the handshake era.

``SUPPORTED_VERSIONS`` is the one list: ``server/discover`` advertises it
(``mcp_endpoint.server``), ``initialize`` negotiates within it and the error above names it.
"""

import json
from collections.abc import Mapping
from typing import Any

from mcp_types import UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse, Response

MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18")
SUPPORTED_VERSIONS = MODERN_VERSIONS + HANDSHAKE_VERSIONS
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]

assert set(MODERN_VERSIONS) <= set(MODERN_PROTOCOL_VERSIONS), "the SDK no longer serves a version we document"
assert set(HANDSHAKE_VERSIONS) <= set(HANDSHAKE_PROTOCOL_VERSIONS), "the SDK no longer serves a version we document"


def _request_id(message: Any) -> Any:
    request_id = message.get("id") if isinstance(message, dict) else None
    return request_id if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


def supported(headers: Mapping[str, str]) -> bool:
    """No ``MCP-Protocol-Version`` header (the SDK serves the handshake era), or one we serve."""
    requested = headers.get("mcp-protocol-version")
    return requested is None or requested in SUPPORTED_VERSIONS


def unsupported_version_response(headers: Mapping[str, str], message: Any) -> Response | None:
    """400 with a JSON-RPC error naming the supported versions, or None if the header is fine.

    ``message`` is the body as the guard parsed it (None if it is not JSON)."""
    if supported(headers):
        return None
    requested = headers["mcp-protocol-version"]
    supported_list = ", ".join(SUPPORTED_VERSIONS)
    error = {
        "code": UNSUPPORTED_PROTOCOL_VERSION,
        "message": f"Unsupported protocol version {requested[:40]!r}; this server supports {supported_list}",
        "data": {"supported": list(SUPPORTED_VERSIONS), "requested": requested[:40]},
    }
    return JSONResponse({"jsonrpc": "2.0", "id": _request_id(message), "error": error}, status_code=400)


def counter_offer(body: bytes, message: Any) -> bytes:
    """The body with an ``initialize`` for an unserved handshake version asking for ours instead.

    ``message`` is ``body`` as the guard parsed it (None if it is not JSON)."""
    params = message.get("params") if isinstance(message, dict) and message.get("method") == "initialize" else None
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    if not isinstance(version, str) or version in HANDSHAKE_VERSIONS:
        return body  # served as asked, or malformed (the SDK says so)
    # Unknown versions get the SDK's own counter-offer, which is the same version.
    params["protocolVersion"] = LATEST_HANDSHAKE_VERSION
    return json.dumps(message).encode()
