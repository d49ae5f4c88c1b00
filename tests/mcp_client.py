"""The official SDK client against a live server, from synchronous tests."""

import asyncio
import json
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any, TypeVar

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from mcp_endpoint import server as mcp_server
from mcp_endpoint.auth import TOKEN_SCOPE_KEY, RequestToken
from mcp_endpoint.versions import LATEST_HANDSHAKE_VERSION

T = TypeVar("T")


def with_client(
    url: str, token: str | None, mode: str, work: Callable[[Client], Awaitable[T]], *, auth: httpx2.Auth | None = None
) -> T:
    """Open an SDK client in ``mode`` ('auto' = 2026-07-28, 'legacy' = 2025-11-25) and run ``work``.

    The client sends ``token`` as a bearer token, or lets ``auth`` (an SDK OAuth provider) get one.
    """
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}

    async def run() -> T:
        async with httpx2.AsyncClient(headers=headers, auth=auth, timeout=30) as http:
            async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
                return await work(client)

    return asyncio.run(run())


def call_tool_directly(grant: Any, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    """Run the server's tools/call handler as if the HTTP check had passed with ``grant``;
    its result (a wire-form dict) read as the SDK client reads it."""
    context = SimpleNamespace(
        request=SimpleNamespace(scope={TOKEN_SCOPE_KEY: RequestToken(grant.token_checksum)}),
        request_id=None,
        protocol_version=LATEST_HANDSHAKE_VERSION,
    )
    params = types.CallToolRequestParams(name=name, arguments=arguments)
    return types.CallToolResult.model_validate(asyncio.run(mcp_server.call_tool(context, params)))


def error_of(result: Any) -> dict[str, str]:
    """The {"code","message"} of a notebook failure result, checking its exact form."""
    assert result.is_error, result
    assert result.structured_content is None, result
    assert len(result.content) == 1, result
    payload = json.loads(result.content[0].text)
    assert list(payload) == ["error"] and sorted(payload["error"]) == ["code", "message"], payload
    return payload["error"]


def success_of(result: Any) -> dict[str, Any]:
    """The structured result of a success, checking the text block carries the same JSON."""
    assert not result.is_error, result.content
    assert len(result.content) == 1
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


def all_four_tools(content: str, query: str) -> Callable[[Client], Awaitable[dict[str, Any]]]:
    """A ``with_client`` body that lists the tools and calls each of the four once: saves
    ``content``, gets it, searches for ``query``, updates it to revision 2. What each answered,
    with the listed tools' names in order under "tools"."""

    async def work(client: Client) -> dict[str, Any]:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        saved = success_of(
            await client.call_tool("field_notes_save", {"requestId": "all-four-1", "entry": {"content": content}})
        )
        entry_id = saved["entry"]["id"]
        got = success_of(await client.call_tool("field_notes_get", {"id": entry_id}))
        found = success_of(await client.call_tool("field_notes_search", {"query": query}))
        update = {"id": entry_id, "expectedRevision": 1, "entry": {"content": f"{content}, v2"}}
        updated = success_of(await client.call_tool("field_notes_update", update))
        return {"tools": tools, "saved": saved, "got": got, "found": found, "updated": updated}

    return work
