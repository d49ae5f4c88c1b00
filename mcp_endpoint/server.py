"""The MCP server object: its identity and the two handlers over the low-level SDK ``Server``.

``tools/call`` runs: tool lookup and argument-tree size (protocol errors), JSON
Schema validation against the very schema ``tools/list`` serves (protocol
error), then one trip through the sync boundary where the token is re-checked
afresh and the notebook service runs in its transaction. Every failure after
that point becomes a notebook error result; nothing else reaches the client.

The jobs live beside it: ``arguments`` (protocol checks), ``boundary`` (the one
sync/async boundary), ``results`` (error mapping and result formatting).
"""

from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server

from mcp_endpoint import auth
from mcp_endpoint.arguments import check_arguments
from mcp_endpoint.results import run_tool
from mcp_endpoint.tools import TOOLS, TOOLS_BY_NAME
from notebook import services
from notebook.exceptions import PermissionDenied, ResourceExhausted, Unauthenticated
from notebook.limits import CANDIDATES_PER_PAGE, thousands

SERVER_NAME = "agent-codex"
SERVER_TITLE = "Agent Codex"
SERVER_VERSION = "0.1.0"

_LISTING = types.ListToolsResult(tools=[types.Tool.model_validate(tool.listing()) for tool in TOOLS])


def _execute(name: str, arguments: dict[str, Any], checksum: str | None) -> dict[str, Any]:
    """Inside the worker thread: re-check the token afresh, then run the service."""
    if checksum is None:
        raise Unauthenticated("This call carries no access token")
    try:
        grant = auth.check_token_checksum(checksum)
    except auth.TokenRejected as rejected:
        raise Unauthenticated(rejected.description) from None
    tool = TOOLS_BY_NAME[name]  # check_arguments has refused unknown names
    if missing := auth.missing_scopes(grant, tool.scopes):
        raise PermissionDenied(f"The access token lacks the scope {' '.join(missing)} needed by {name}")
    if retry_after := auth.tool_call_retry_after(checksum):
        raise ResourceExhausted(
            f"This access token made more than {settings.CODEX_TOOL_CALLS_PER_MINUTE} tool calls this minute "
            f"(CODEX_TOOL_CALLS_PER_MINUTE); retry in {retry_after} seconds"
        )
    codex = services.codex_for_user(user=grant.user)
    return tool.adapter(codex, arguments, auth.writer_of(grant))


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    arguments = params.arguments if params.arguments is not None else {}
    check_arguments(name, arguments)

    request = ctx.request
    grant = request.scope.get(auth.GRANT_SCOPE_KEY) if request is not None else None
    checksum = grant.token_checksum if grant is not None else None
    return await run_tool(name, lambda: _execute(name, arguments, checksum))


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return _LISTING


def tool_input_schema(name: str) -> dict[str, Any] | None:
    tool = TOOLS_BY_NAME.get(name)
    return tool.input_schema if tool is not None else None


def create_server() -> Server[Any]:
    return Server(
        SERVER_NAME,
        title=SERVER_TITLE,
        version=SERVER_VERSION,
        instructions=(
            "Agent Codex keeps field notes in the signed-in person's private notebook. "
            "Save with a requestId you can retry; search pages scan at most "
            f"{thousands(CANDIDATES_PER_PAGE)} notes, so follow "
            "nextCursor until coverage.hasMore is false; update replaces a note completely."
        ),
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
