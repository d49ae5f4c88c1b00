"""Raw JSON-RPC over HTTP to a live server, for tests of the wire itself."""

import json
from typing import Any

import httpx2

MODERN = "2026-07-28"
LEGACY = "2025-06-18"
# The first version with Streamable HTTP; its clients send no MCP-Protocol-Version header.
OLDEST = "2025-03-26"


def rpc_body(method: str, params: dict[str, Any] | None = None, *, version: str = LEGACY, request_id: int = 1) -> dict:
    params = dict(params or {})
    if version == MODERN:
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def post(
    url: str,
    body: Any = None,
    *,
    token: str | None = None,
    version: str | None = LEGACY,
    headers: dict[str, str] | None = None,
    content: bytes | None = None,
) -> httpx2.Response:
    """POST one message. ``body`` is JSON-encoded unless raw ``content`` is given; ``version``
    None sends no MCP-Protocol-Version header."""
    sent = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if version is not None:
        sent["MCP-Protocol-Version"] = version
    if isinstance(body, dict) and version == MODERN:
        sent["Mcp-Method"] = body.get("method", "")
        if body.get("method") == "tools/call":
            sent["Mcp-Name"] = body["params"]["name"]
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    sent.update(headers or {})
    if content is None:
        content = json.dumps(body).encode()
    with httpx2.Client(timeout=30) as client:
        return client.post(url, content=content, headers=sent)


def call_tool(url: str, token: str, name: str, arguments: Any, *, version: str = LEGACY) -> httpx2.Response:
    return post(
        url,
        rpc_body("tools/call", {"name": name, "arguments": arguments}, version=version),
        token=token,
        version=version,
    )
