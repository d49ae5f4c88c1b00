"""The MCP server object: its identity and the handlers over the low-level SDK ``Server``.

``tools/call`` runs: tool lookup and argument-tree size (protocol errors), then one trip
through the sync boundary where the token is checked afresh (one query; for a single call
this is the only check, see ``mcp_endpoint.http``), the arguments are validated against the
very schema ``tools/list`` serves (a violation is an ``invalid_argument`` result), and the
notebook service runs in its transaction. Every failure after the protocol checks becomes a
notebook error result; nothing else reaches the client.

The jobs live beside it: ``arguments`` (protocol checks), ``boundary`` (the one
sync/async boundary), ``results`` (error mapping and result formatting).
"""

from collections.abc import Iterable
from typing import Any

import mcp_types as types
from django.conf import settings
from django.db import DatabaseError
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.inbound import x_mcp_header_map

from codex_site import tracing
from mcp_endpoint import auth
from mcp_endpoint.arguments import check_call, schema_violation
from mcp_endpoint.calls import ToolCall
from mcp_endpoint.results import run_tool
from mcp_endpoint.tools import TOOLS, TOOLS_BY_NAME, Tool
from mcp_endpoint.versions import SUPPORTED_VERSIONS
from notebook import services
from notebook.exceptions import InvalidArgument, PermissionDenied, ResourceExhausted, Unauthenticated, Unavailable
from notebook.limits import CANDIDATES_PER_PAGE, thousands

SERVER_NAME = "agent-codex"
SERVER_TITLE = "Agent Codex"
SERVER_VERSION = "0.1.0"

_LISTING = types.ListToolsResult(tools=[types.Tool.model_validate(tool.listing()) for tool in TOOLS])


def _grant_for(tool: Tool, call: auth.DeferredCheck | auth.TokenGrant | None) -> auth.TokenGrant:
    """Check the call's token afresh (one query); a deferred check records its outcome
    for the HTTP guard, which answers a refusal with 401/403/503."""
    if call is None:
        raise Unauthenticated("This call carries no access token")
    deferred = call if isinstance(call, auth.DeferredCheck) else None
    try:
        if deferred is not None:
            grant = auth.check_bearer_token(deferred.raw_token)
        else:
            grant = auth.check_token_checksum(call.token_checksum)
    except auth.TokenRejected as rejected:
        if deferred is not None:
            deferred.rejected = rejected
        raise Unauthenticated(rejected.description) from None
    except DatabaseError as error:
        if deferred is None:
            raise
        # The guard answers 503 and logs the outage (once, as for its own check).
        deferred.outage = error
        raise Unavailable("The server cannot check tokens right now; retry shortly") from None
    if missing := auth.missing_scopes(grant, tool.scopes):
        if deferred is not None:
            deferred.missing = missing
        raise PermissionDenied(f"The access token lacks the scope {' '.join(missing)} needed by {tool.name}")
    if deferred is not None:
        deferred.checked = True
    return grant


def _execute(
    name: str,
    arguments: dict[str, Any],
    call: auth.DeferredCheck | auth.TokenGrant | None,
    record: ToolCall | None = None,
) -> dict[str, Any]:
    """Inside the worker thread (one hop per call): check the token afresh, then run the service."""
    tool = TOOLS_BY_NAME[name]  # check_call has refused unknown names
    # The token first: arguments are judged only for a caller allowed to call the tool.
    with tracing.span("codex.token_check"):
        grant = _grant_for(tool, call)
    if retry_after := auth.tool_call_retry_after(grant.token_checksum):
        raise ResourceExhausted(
            f"This access token made more than {settings.CODEX_TOOL_CALLS_PER_MINUTE} tool calls this minute "
            f"(CODEX_TOOL_CALLS_PER_MINUTE); retry in {retry_after} seconds"
        )
    if violation := schema_violation(name, arguments):
        raise InvalidArgument(violation)
    with tracing.span("codex.service", {"gen_ai.tool.name": name}):
        codex = services.codex_for_user(user=grant.user)
        if record is not None:
            record.codex_id = codex.pk
        return tool.adapter(codex, arguments, auth.writer_of(grant))


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> dict[str, Any]:
    name = params.name
    arguments = params.arguments if params.arguments is not None else {}
    check_call(name, arguments)

    request = ctx.request
    scope = request.scope if request is not None else {}
    # The token the HTTP guard left unchecked for us, or the grant it checked (a batch).
    call = scope.get(auth.DEFERRED_SCOPE_KEY) or scope.get(auth.GRANT_SCOPE_KEY)
    record = ToolCall(name, ctx.request_id)
    return await run_tool(name, lambda: _execute(name, arguments, call, record), record)


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return _LISTING


# The schemas with something for the SDK's Mcp-Param-* header check: it compares those
# headers with the arguments that ``x-mcp-header`` annotations name, walking the schema
# twice on every call with arguments. A schema without annotations has nothing to check,
# for which the SDK's hook takes None (the same answer, without the walks).
def header_annotated(tools: Iterable[Tool]) -> dict[str, dict[str, Any]]:
    return {tool.name: tool.input_schema for tool in tools if x_mcp_header_map(tool.input_schema)}


_HEADER_ANNOTATED = header_annotated(TOOLS)


def tool_input_schema(name: str) -> dict[str, Any] | None:
    """The SDK's ``get_tool_input_schema``: the schema when its Mcp-Param-* headers need checking."""
    return _HEADER_ANNOTATED.get(name)


def create_server() -> Server[Any]:
    server = Server(
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

    async def discover(ctx: ServerRequestContext[Any, Any], params: types.RequestParams) -> types.DiscoverResult:
        # The SDK's default handler advertises only its modern versions; a client that reads
        # this list must see what initialize negotiates and what a version error names
        # (contract 7: one list, mcp_endpoint.versions). Replaced through the SDK's documented
        # add_request_handler("server/discover", ...); capabilities stay the SDK's own.
        return types.DiscoverResult(
            supported_versions=list(SUPPORTED_VERSIONS),
            capabilities=server.get_capabilities(protocol_version=ctx.protocol_version),
            instructions=server.instructions,
        )

    server.add_request_handler("server/discover", types.RequestParams, discover)
    return server
