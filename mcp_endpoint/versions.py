"""The MCP protocol versions this server serves, and the answer for any other.

The SDK (mcp 2.3.0) would accept more than we test and document: its
``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS`` also holds 2024-11-05.
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

Requests without the header are served as 2025-03-26, as the specification asks of a server
that cannot otherwise tell the version (a stateless one cannot): the SDK seeds the request's
``protocol_version`` with its ``DEFAULT_NEGOTIATED_VERSION``, and ``requested_version`` says
the same here. The clients of that era send no header.

What an era knows follows the specification of each version: ``structuredContent`` and a
tool's ``outputSchema`` and ``title`` came with 2025-06-18 (``structured``), and JSON-RPC
batches were part of 2025-03-26 only (``batches_allowed``; 2025-06-18 removed them).

``SUPPORTED_VERSIONS`` is the one list: ``server/discover`` advertises it
(``mcp_endpoint.server``), ``initialize`` negotiates within it and the error above names it.
"""

import json
from collections.abc import Mapping
from typing import Any

from mcp_types import DEFAULT_NEGOTIATED_VERSION, UNSUPPORTED_PROTOCOL_VERSION
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS, is_version_at_least
from starlette.responses import JSONResponse, Response

from mcp_endpoint.envelopes import request_id

MODERN_VERSIONS = ("2026-07-28",)
HANDSHAKE_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")
SUPPORTED_VERSIONS = MODERN_VERSIONS + HANDSHAKE_VERSIONS
LATEST = MODERN_VERSIONS[0]
LATEST_HANDSHAKE_VERSION = HANDSHAKE_VERSIONS[0]
# The first version with structured tool results (structuredContent, outputSchema) and tool titles.
STRUCTURED_SINCE = "2025-06-18"
# The versions whose Streamable HTTP takes a JSON-RPC batch in one POST.
BATCH_VERSIONS = ("2025-03-26",)

assert set(MODERN_VERSIONS) <= set(MODERN_PROTOCOL_VERSIONS), "the SDK no longer serves a version we document"
assert set(HANDSHAKE_VERSIONS) <= set(HANDSHAKE_PROTOCOL_VERSIONS), "the SDK no longer serves a version we document"
assert DEFAULT_NEGOTIATED_VERSION in HANDSHAKE_VERSIONS, "a request without a version header would not be served"


def requested_version(headers: Mapping[str, str]) -> str:
    """The version a request is served in: its ``MCP-Protocol-Version`` header, or, without one,
    the version the specification says to assume (the SDK's ``DEFAULT_NEGOTIATED_VERSION``)."""
    return headers.get("mcp-protocol-version", DEFAULT_NEGOTIATED_VERSION)


def structured(protocol_version: str) -> bool:
    """Whether results and listings in ``protocol_version`` carry structured content and output schemas."""
    return is_version_at_least(protocol_version, STRUCTURED_SINCE)


def modern(protocol_version: str) -> bool:
    """Whether ``protocol_version`` is of the stateless era (no handshake; ``resultType`` on results)."""
    return protocol_version in MODERN_PROTOCOL_VERSIONS


def batches_allowed(headers: Mapping[str, str]) -> bool:
    """Whether the request's version takes a JSON-RPC batch."""
    return requested_version(headers) in BATCH_VERSIONS


def supported(headers: Mapping[str, str]) -> bool:
    """No ``MCP-Protocol-Version`` header (served as 2025-03-26), or one we serve."""
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
    return JSONResponse({"jsonrpc": "2.0", "id": request_id(message), "error": error}, status_code=400)


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
