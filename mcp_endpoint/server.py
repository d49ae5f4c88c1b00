"""The MCP server object: four tools over the low-level SDK ``Server``.

``tools/call`` runs: tool lookup and argument-tree size (protocol errors), JSON
Schema validation against the very schema ``tools/list`` serves (protocol
error), then one trip through the sync boundary where the token is re-checked
afresh and the notebook service runs in its transaction. Every failure after
that point becomes a notebook error result; nothing else reaches the client.
"""

import json
import logging
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections
from jsonschema import Draft7Validator
from jsonschema.exceptions import ValidationError as SchemaViolation
from jsonschema.exceptions import best_match
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from authserver import ratelimit
from codex_site.outage import log_database_unavailable
from mcp_endpoint import auth
from mcp_endpoint.schemas import TOOL_SCOPES, TOOLS, TOOLS_BY_NAME
from mcp_endpoint.tools import ADAPTERS
from notebook import services
from notebook.exceptions import (
    Internal,
    NotebookError,
    PermissionDenied,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

logger = logging.getLogger(__name__)

SERVER_NAME = "agent-codex"
SERVER_TITLE = "Agent Codex"
SERVER_VERSION = "0.1.0"
MAX_ARGUMENT_MEMBERS = 2_000
GRANT_SCOPE_KEY = "codex.grant"

_VALIDATORS = {tool["name"]: Draft7Validator(tool["inputSchema"]) for tool in TOOLS}
_LISTING = types.ListToolsResult(tools=[types.Tool.model_validate(tool) for tool in TOOLS])

T = TypeVar("T")


async def run_sync(work: Callable[[], T]) -> T:
    """The one sync/async boundary: ORM work runs in a worker thread (not one shared
    thread), with connections opened and closed around it as Django's own ASGI
    handler does around a request."""

    def call() -> T:
        close_old_connections()
        try:
            return work()
        finally:
            close_old_connections()

    return await sync_to_async(call, thread_sensitive=False)()


def count_members(value: Any, limit: int = MAX_ARGUMENT_MEMBERS) -> int:
    """Cumulative array elements plus object members in a JSON tree; stops once past ``limit``."""
    total = 0
    stack = [value]
    while stack and total <= limit:
        node = stack.pop()
        if isinstance(node, dict):
            total += len(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            total += len(node)
            stack.extend(node)
    return total


def _path(error: SchemaViolation) -> str:
    path = "arguments"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def describe_violation(error: SchemaViolation) -> str:
    """A short message naming the failing path, without echoing (possibly huge) values."""
    rule, limit = error.validator, error.validator_value
    messages = {
        "type": f"must be of type {limit}",
        "maxLength": f"must be at most {limit} characters",
        "minLength": "must not be empty" if limit == 1 else f"must be at least {limit} characters",
        "maxItems": f"must have at most {limit} items",
        "minimum": f"must be at least {limit}",
        "maximum": f"must be at most {limit}",
        "pattern": f"must match {limit}",
    }
    if rule in messages:
        return f"{_path(error)} {messages[rule]}"
    if rule == "required":
        missing = [name for name in limit if isinstance(error.instance, dict) and name not in error.instance]
        return f"{_path(error)} is missing required member {missing[0]!r}" if missing else error.message[:200]
    if rule == "additionalProperties" and isinstance(error.instance, dict):
        allowed = set(error.schema.get("properties", {}))
        extra = sorted(str(key) for key in error.instance if key not in allowed)
        return f"{_path(error)} has unexpected member {extra[0][:64]!r}" if extra else error.message[:200]
    return f"{_path(error)}: {error.message[:200]}"


def _check_arguments(name: str, arguments: dict[str, Any]) -> None:
    """Protocol-level checks: unknown tool, argument-tree size, JSON Schema."""
    if name not in TOOLS_BY_NAME:
        raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {name[:100]!r}")
    if count_members(arguments) > MAX_ARGUMENT_MEMBERS:
        raise MCPError(
            code=INVALID_PARAMS,
            message=f"arguments have more than {MAX_ARGUMENT_MEMBERS} array elements and object members in all",
        )
    error = best_match(_VALIDATORS[name].iter_errors(arguments))
    if error is not None:
        raise MCPError(code=INVALID_PARAMS, message=f"Invalid arguments for {name}: {describe_violation(error)}")


def _text_result(payload: dict[str, Any], *, is_error: bool) -> types.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=None if is_error else payload,
        is_error=is_error,
    )


def error_result(error: NotebookError) -> types.CallToolResult:
    """The only place notebook failures are formatted (contract 6)."""
    return _text_result({"error": {"code": error.code, "message": error.message}}, is_error=True)


def _execute(name: str, arguments: dict[str, Any], checksum: str | None) -> dict[str, Any]:
    """Inside the worker thread: re-check the token afresh, then run the service."""
    if checksum is None:
        raise Unauthenticated("This call carries no access token")
    try:
        grant = auth.check_token_checksum(checksum)
    except auth.TokenRejected as rejected:
        raise Unauthenticated(rejected.description) from None
    if missing := auth.missing_scopes(grant, TOOL_SCOPES[name]):
        raise PermissionDenied(f"The access token lacks the scope {' '.join(missing)} needed by {name}")
    limit = settings.CODEX_TOOL_CALLS_PER_MINUTE
    # Counted in the database cache, so every worker and host shares one count per token.
    ok, retry_after = ratelimit.allow("tool-calls", checksum, limit=limit, window_seconds=60)
    if not ok:
        raise ResourceExhausted(
            f"This access token made more than {limit} tool calls this minute "
            f"(CODEX_TOOL_CALLS_PER_MINUTE); retry in {retry_after} seconds"
        )
    codex = services.codex_for_user(user=grant.user)
    return ADAPTERS[name](codex, arguments)


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    name = params.name
    arguments = params.arguments if params.arguments is not None else {}
    _check_arguments(name, arguments)

    request = ctx.request
    grant = request.scope.get(GRANT_SCOPE_KEY) if request is not None else None
    checksum = grant.token_checksum if grant is not None else None
    try:
        result = await run_sync(lambda: _execute(name, arguments, checksum))
    except NotebookError as error:
        return error_result(error)
    except (OperationalError, InterfaceError) as error:
        log_database_unavailable(logger, name, error)
        return error_result(Unavailable("The notebook is temporarily unavailable; retry shortly"))
    except Exception:  # the tool boundary: nothing escapes to the client
        reference = uuid.uuid4().hex[:12]
        logger.error("tool %s failed (reference %s)", name, reference, exc_info=True)
        return error_result(Internal(f"Something went wrong on the server (reference {reference})"))
    return _text_result(result, is_error=False)


async def list_tools(
    ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return _LISTING


def tool_input_schema(name: str) -> dict[str, Any] | None:
    tool = TOOLS_BY_NAME.get(name)
    return tool["inputSchema"] if tool is not None else None


def create_server() -> Server[Any]:
    return Server(
        SERVER_NAME,
        title=SERVER_TITLE,
        version=SERVER_VERSION,
        instructions=(
            "Agent Codex keeps field notes in the signed-in person's private notebook. "
            "Save with a requestId you can retry; search pages scan at most 100 notes, so follow "
            "nextCursor until coverage.hasMore is false; update replaces a note completely."
        ),
        get_tool_input_schema=tool_input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
