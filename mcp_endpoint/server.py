"""The MCP server object: its identity and the handlers over the low-level SDK ``Server``.

``tools/call`` runs: tool lookup and argument-tree size (protocol errors), then one trip
through the sync boundary where the request's token is checked afresh first (one query,
``auth.RequestToken``), the arguments are validated against the very schema ``tools/list``
serves (a violation is an ``invalid_argument`` result), and the notebook service runs in its
transaction. Every failure after the protocol checks becomes a notebook error result, but for
a refused token when the guard left the request's check to this call (``answers_request``):
that refusal is the request's answer, raised for the guard.

The jobs live beside it: ``arguments`` (protocol checks), ``boundary`` (the one
sync/async boundary), ``results`` (error mapping and result formatting).
"""

import logging
from collections.abc import Iterable
from typing import Any

import mcp_types as types
from django.conf import settings
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.caching import CacheHint
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.inbound import x_mcp_header_map

import codex_metrics
from common import access_log, tracing
from mcp_endpoint import auth, identity, versions
from mcp_endpoint.arguments import check_call, schema_violation
from mcp_endpoint.calls import ToolCall
from mcp_endpoint.exchange import ServedToolResults
from mcp_endpoint.results import OUTCOMES, run_tool
from mcp_endpoint.tools import TOOLS, TOOLS_BY_NAME, Tool
from notebook import services
from notebook.exceptions import InvalidArgument, ResourceExhausted, Unauthenticated
from notebook.limits import CANDIDATES_PER_PAGE, thousands

logger = logging.getLogger(__name__)

codex_metrics.define_tool_calls(TOOLS_BY_NAME, OUTCOMES)


def _listed(tool: Tool, *, structured: bool) -> types.Tool:
    """The tool as ``tools/list`` shows it: in full, or as 2025-03-26 knows a tool, which has
    neither an output schema nor a title of its own (its annotations carry the title)."""
    listing = tool.listing()
    if not structured:
        del listing["outputSchema"]
        listing["annotations"] = {"title": listing.pop("title"), **listing["annotations"]}
    return types.Tool.model_validate(listing)


# By whether the protocol version has structured results (versions.structured).
_LISTINGS = {
    structured: types.ListToolsResult(tools=[_listed(tool, structured=structured) for tool in TOOLS])
    for structured in (True, False)
}


def _execute(
    name: str, arguments: dict[str, Any], token: auth.RequestToken | None, record: ToolCall | None = None
) -> dict[str, Any]:
    """Inside the worker thread (one hop per call): check the token afresh (a get's entry read in
    the same statement), count the call against the token's rate limit, check the arguments
    against the tool's schema, then run the service."""
    if token is None:
        raise Unauthenticated("This call carries no access token")  # no guard in front of the server
    tool = TOOLS_BY_NAME[name]  # check_call has refused unknown names
    # The tool's first read rides in the token check's statement; it is used only below,
    # once the check has passed.
    ahead = tool.read_ahead(arguments) if tool.read_ahead is not None else None
    # The token first: arguments are judged only for a caller allowed to call the tool.
    with tracing.span("codex.token_check"):
        grant = token.check(tool.scopes, ahead)
    if retry_after := auth.tool_call_retry_after(grant.token_checksum):
        codex_metrics.limit_refused("tool_calls_per_minute")
        raise ResourceExhausted(
            f"This access token made more than {settings.CODEX_TOOL_CALLS_PER_MINUTE} tool calls this minute "
            f"(CODEX_TOOL_CALLS_PER_MINUTE); retry in {retry_after} seconds"
        )
    if violation := schema_violation(name, arguments):
        raise InvalidArgument(violation)
    with tracing.span("codex.service", {"gen_ai.tool.name": tool.name}):
        codex = services.codex_for_user(user=grant.user)
        if record is not None:
            record.codex_id, record.user_id, record.client_id = codex.pk, grant.user.pk, grant.client_id or None
            # The entry a get or an update names (its schema has made it a UUID by now).
            record.entry_id = arguments.get("id") if isinstance(arguments.get("id"), str) else None
        try:
            answer = tool.adapter(codex, arguments, auth.writer_of(grant), ahead)
        finally:
            auth.note_use(grant)
        if record is not None and record.entry_id is None:
            record.entry_id = _entry_id(answer)  # the entry a save made (or found again)
        return answer


def _entry_id(answer: dict[str, Any]) -> str | None:
    entry = answer.get("entry")
    return entry.get("id") if isinstance(entry, dict) else None


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> dict[str, Any]:
    name = params.name
    arguments = params.arguments if params.arguments is not None else {}
    check_call(name, arguments)

    request = ctx.request
    scope = request.scope if request is not None else {}
    token = scope.get(auth.TOKEN_SCOPE_KEY)  # the request's token, which the HTTP guard left
    record = ToolCall(name, ctx.request_id, line=access_log.line_of(scope))
    return await run_tool(
        name,
        lambda: _execute(name, arguments, token, record),
        record,
        version=ctx.protocol_version,
        refusal_answers_request=token is not None and token.answers_request,
    )


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return _LISTINGS[versions.structured(ctx.protocol_version)]


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


# tools/list and server/discover are the same for every person and every token (the listing
# differs only by protocol version, never by who asks) and change only with a release, so any
# client, and any cache shared between people ("public"), may keep them for as long as anything
# that describes the server (identity.DESCRIPTION_MAX_AGE_SECONDS). The hints are SEP-2549's,
# defined in 2026-07-28 only: the SDK leaves them out of earlier versions' answers, whose results
# have no such members. tools/call answers for one person and is no cacheable method: no hint.
CACHE_HINTS = {
    method: CacheHint(ttl_ms=identity.DESCRIPTION_MAX_AGE_SECONDS * 1000, scope="public")
    for method in ("tools/list", "server/discover")
}


def create_server(instance: identity.Instance | None = None) -> Server[Any]:
    """The server for ``instance`` (by default, the configured one: its URLs are in serverInfo)."""
    server = Server(
        **identity.server_info(instance or identity.Instance.configured()),
        cache_hints=CACHE_HINTS,
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
            supported_versions=list(versions.SUPPORTED_VERSIONS),
            capabilities=server.get_capabilities(protocol_version=ctx.protocol_version),
            instructions=server.instructions,
        )

    server.add_request_handler("server/discover", types.RequestParams, discover)
    # The SDK's span while tracing is on or a message continues a client's trace, outermost
    # (common.tracing.WhileTracing); inside it, a tools/call result goes out as the handler
    # built it, in its version's wire form, without a second validation.
    server.middleware[:] = [
        tracing.WhileTracing(item) if isinstance(item, OpenTelemetryMiddleware) else item for item in server.middleware
    ]
    server.middleware.append(ServedToolResults(server, call_tool))
    return server
