"""The benchmark's anchor: a bare MCP SDK server with one tool that does nothing.

Built like the project's endpoint (low-level ``Server``, stateless, JSON responses,
``get_tool_input_schema`` set, 2026-07-28 requests accepted) but without Django,
authentication or a database, so that ``scripts/bench_mcp.py`` can report each tool
as a fraction of what the SDK and uvicorn alone can serve on the same machine.

    uvicorn --app-dir scripts bench_noop_server:app --port 8001
"""

from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

NOOP_TOOL = {
    "name": "noop",
    "description": "Does nothing and answers at once.",
    "inputSchema": {"type": "object", "properties": {}, "additionalProperties": True},
}
_LISTING = types.ListToolsResult(tools=[types.Tool.model_validate(NOOP_TOOL)])
_RESULT = types.CallToolResult(content=[types.TextContent(type="text", text="{}")], structured_content={})


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return _LISTING


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    return _RESULT


def input_schema(name: str) -> dict[str, Any] | None:
    return NOOP_TOOL["inputSchema"] if name == NOOP_TOOL["name"] else None


server = Server(
    "bench-noop",
    version="0.0.0",
    get_tool_input_schema=input_schema,
    on_list_tools=list_tools,
    on_call_tool=call_tool,
)
session_manager = StreamableHTTPSessionManager(
    app=server,
    json_response=True,
    stateless=True,
    security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
)


class MCPApp:
    """An ASGI app (a class instance, so Starlette's Route passes the raw scope)."""

    async def __call__(self, scope, receive, send) -> None:
        await session_manager.handle_request(scope, receive, send)


app = Starlette(routes=[Route("/mcp", endpoint=MCPApp(), methods=["POST"])], lifespan=lambda _: session_manager.run())
