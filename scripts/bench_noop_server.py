"""The benchmark's anchor: a bare MCP SDK server with one tool that does nothing.

Built like the project's endpoint (low-level ``Server``, stateless, JSON responses,
``get_tool_input_schema`` set, 2026-07-28 requests accepted) but without Django,
authentication or a database, so that ``scripts/bench_mcp.py`` can report each tool
as a fraction of what the SDK and uvicorn alone can serve on the same machine.

    uvicorn --app-dir scripts bench_noop_server:app --port 8001
"""

import contextlib
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


def sdk_app(name: str, on_call_tool: Any, *, ready: Any = None) -> Starlette:
    """The anchor's server around ``on_call_tool``: the one ``noop`` tool, built as the project's
    endpoint is, over Starlette. ``ready``, if given, is awaited at startup (``bench_boundary_server``'s
    database connections)."""
    server = Server(
        name,
        version="0.0.0",
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=on_call_tool,
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

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if ready is not None:
            await ready()
        async with session_manager.run():
            yield

    return Starlette(routes=[Route("/mcp", endpoint=MCPApp(), methods=["POST"])], lifespan=lifespan)


app = sdk_app("bench-noop", call_tool)
