"""The HTTP face of the MCP endpoint: request guards, bearer-token checks, and the
RFC 9728 protected-resource metadata. ``codex_site.asgi`` routes to ``mcp_http_app``.

Order of the guards on /mcp: CORS preflight (``mcp_endpoint.cors``: answered for allowed
origins, 403 for others, no token needed), Host (421), Origin (403), GET (405: no stream
is offered), body size (413, before any parsing), bearer token (401), tool scopes (403
``insufficient_scope``), protocol version (400, ``mcp_endpoint.versions``); only then does
the SDK's stateless Streamable HTTP transport see the request.

A single ``tools/call`` of a known tool is the exception to the token and scope steps:
its token is checked once, by the tool handler, afresh and in the same worker-thread hop
as the service (``mcp_endpoint.server``), instead of twice. The guard reads the answer on
its way out (``_answer``): a refusal result (``REFUSAL_META``) becomes 401/403/503 with
the challenge, exactly as if the guard had refused the token itself; an answer the SDK gave
before the handler ran (a JSON-RPC error) waits for the guard's own check first. So no
answer leaves without a token check, a call costs one token query, and nothing flows back
up but the answer itself (``mcp_endpoint.auth``).
"""

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic_core import from_json
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

import codex_metrics
from common import tracing
from common.origins import origin_allowed
from common.outage import log_database_unavailable
from mcp_endpoint import auth, versions
from mcp_endpoint.auth import ALL_SCOPES
from mcp_endpoint.batches import batch_answer, batch_refusal
from mcp_endpoint.boundary import run_sync
from mcp_endpoint.cors import OriginGuardingCORSMiddleware
from mcp_endpoint.envelopes import envelope_problem, error_response, request_id
from mcp_endpoint.server import create_server
from mcp_endpoint.tools import TOOLS_BY_NAME, scopes_for
from notebook.limits import MAX_BODY_BYTES

logger = logging.getLogger(__name__)

# The MCP endpoint itself (contract 7: /mcp, and /mcp/ without a redirect).
ENDPOINT_PATHS = frozenset({"/mcp", "/mcp/"})
PRM_PATH = "/.well-known/oauth-protected-resource/mcp"
PRM_ROOT_PATH = "/.well-known/oauth-protected-resource"


def protected_resource_metadata_url() -> str:
    return settings.CODEX_PUBLIC_URL + PRM_PATH


def protected_resource_metadata() -> dict[str, Any]:
    return {
        "resource": settings.CODEX_RESOURCE_URL,
        "authorization_servers": [settings.CODEX_ISSUER_URL],
        "scopes_supported": list(ALL_SCOPES),
        "bearer_methods_supported": ["header"],
        "resource_name": "Agent Codex",
    }


def _quoted(value: str) -> str:
    """An RFC 9110 quoted-string: backslash and double quote escaped."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _challenge(*, error: str | None, description: str | None, scopes: Iterable[str]) -> str:
    parts = []
    if error:
        parts.append(f"error={_quoted(error)}")
    if description:
        parts.append(f"error_description={_quoted(description)}")
    parts.append(f"resource_metadata={_quoted(protected_resource_metadata_url())}")
    parts.append(f"scope={_quoted(' '.join(scopes))}")
    return "Bearer " + ", ".join(parts)


def _auth_error(status: int, *, error: str | None, description: str, scopes: Iterable[str]) -> Response:
    body: dict[str, str] = {"error": error or "unauthorized", "error_description": description}
    return JSONResponse(
        body,
        status_code=status,
        headers={
            "WWW-Authenticate": _challenge(error=error, description=description if error else None, scopes=scopes)
        },
    )


def _plain_error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status_code=status)


def request_headers(scope: Scope) -> dict[str, str]:
    """The request's headers by (lower-case) name, decoded once: the guard reads about ten
    of them, and Starlette's ``Headers`` decodes every name on each lookup. The first of
    a repeated header wins, as ``Headers.get`` has it."""
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in reversed(scope["headers"])}


def _bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token from ``Authorization: Bearer <token>``; never from the query string."""
    value = headers.get("authorization")
    if not value:
        return None
    scheme, _, token = value.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _parse(body: bytes) -> Any:
    """The body as JSON, parsed once for every guard that looks into it; None if malformed.

    The SDK's own parser, so both agree on what is JSON: it refuses nesting past its
    recursion limit with ValueError, where json.loads would raise RecursionError.
    """
    if not body:
        return None
    try:
        return from_json(body)
    except ValueError:
        return None  # the SDK answers malformed (or too deeply nested) JSON with a parse error


def _called_tools(headers: Mapping[str, str], message: Any) -> list[str]:
    """Tool names this POST calls: from Mcp-Name (2026-07-28) or, for older clients, the body.

    The SDK later rejects a body that disagrees with the Mcp-* headers, so trusting
    the header here cannot be used to dodge the scope check.
    """
    if headers.get("mcp-method") == "tools/call" and headers.get("mcp-name"):
        return [headers["mcp-name"]]
    messages = message if isinstance(message, list) else [message]
    names = []
    for item in messages:
        if isinstance(item, dict) and item.get("method") == "tools/call":
            params = item.get("params")
            if isinstance(params, dict) and isinstance(params.get("name"), str):
                names.append(params["name"])
    return names


def _is_single_tool_call(headers: Mapping[str, str], message: Any, names: list[str]) -> bool:
    """One call of a known tool: its handler can check the token (contract 8's afresh check).

    Only a request: a notification (or an id JSON-RPC does not allow, which the SDK reads as
    one) is answered 202 without running any handler, so the guard must check its token."""
    if len(names) != 1 or names[0] not in TOOLS_BY_NAME:
        return False
    if headers.get("mcp-method") == "tools/call":
        return True  # 2026-07-28: one message per POST (the SDK refuses a body that disagrees)
    return isinstance(message, dict) and message.get("jsonrpc") == "2.0" and request_id(message) is not None


def _tokens_unavailable() -> Response:
    response = _plain_error(503, "The server cannot check tokens right now; retry shortly")
    response.headers["Retry-After"] = "5"
    return response


def _outage_response(error: Exception) -> Response:
    log_database_unavailable(logger, "token check", error)
    return _tokens_unavailable()


def _insufficient_scope(names: Iterable[str], missing: Iterable[str]) -> Response:
    needed = set().union(*(scopes_for(name) for name in names))
    needed_in_order = [scope_name for scope_name in ALL_SCOPES if scope_name in needed]
    description = f"This call needs the scope {' '.join(missing)}"
    return _auth_error(403, error="insufficient_scope", description=description, scopes=needed_in_order)


async def _check_token(raw_token: str, names: list[str]) -> tuple[Response | None, auth.TokenGrant | None]:
    """The guard's own token and scope check: a refusal, or the grant."""
    needed = set().union(*(scopes_for(name) for name in names))
    in_order = [scope_name for scope_name in ALL_SCOPES if scope_name in needed]
    try:
        with tracing.span("codex.token_check"):
            grant = await run_sync(lambda: auth.check_bearer_token(raw_token, in_order))
    except auth.TokenRejected as rejected:
        return _auth_error(401, error="invalid_token", description=rejected.description, scopes=ALL_SCOPES), None
    except auth.ScopesMissing as lacking:
        return _insufficient_scope(names, lacking.missing), None
    except DatabaseError as error:
        return _outage_response(error), None
    return None, grant


_REFUSAL_KEY = f'"{auth.REFUSAL_META}"'.encode()


async def _answer(body: bytes, raw_token: str, tool: str) -> Response | None:
    """The HTTP refusal to send instead of this answer to a single tool call, else None.

    Every tool result comes from a handler that checked the token first: a success, or a
    notebook error, lets out as it is. Only an answer holding the refusal's key or the key
    ``"error"`` (the SDK's own JSON-RPC error) is parsed: escaped inside a JSON string, a
    quote never appears bare, so nothing a note holds can look like either key.
    """
    if _REFUSAL_KEY not in body and b'"error"' not in body:
        return None
    answer = _parse(body)
    result = answer.get("result") if isinstance(answer, dict) else None
    if isinstance(result, dict):
        meta = result.get("_meta")
        refusal = meta.get(auth.REFUSAL_META) if isinstance(meta, dict) else None
        return _refusal_response(refusal, tool) if isinstance(refusal, dict) else None
    # The SDK answered before the handler checked the token (a protocol error): nothing
    # leaves without a check, so the guard checks now.
    refusal, _grant = await _check_token(raw_token, [tool])
    return refusal


def _refusal_response(refusal: dict[str, Any], tool: str) -> Response:
    status = refusal["status"]
    if status == 401:
        return _auth_error(401, error="invalid_token", description=refusal["description"], scopes=ALL_SCOPES)
    if status == 403:
        return _insufficient_scope([tool], refusal["missing"])
    return _tokens_unavailable()  # the handler logged the outage


def _origin_allowed(origin: str) -> bool:
    return origin_allowed(origin)  # localhost, 127.0.0.1 and [::1] on one port are one origin


def _host_allowed(host: str) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


async def _read_body(receive: Receive, declared: str | None) -> bytes | None:
    """The whole body, or None once it exceeds MAX_BODY_BYTES (checked before parsing)."""
    if declared is not None:
        try:
            if int(declared) > MAX_BODY_BYTES:
                return None
        except ValueError:
            pass
    chunks = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.extend(message.get("body", b""))
        if len(chunks) > MAX_BODY_BYTES:
            return None
        if not message.get("more_body", False):
            break
    return bytes(chunks)


class GuardedMCPApp:
    """ASGI app for /mcp: the guards, then the SDK's session manager."""

    def __init__(self, session_manager: StreamableHTTPSessionManager) -> None:
        self.session_manager = session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not tracing.enabled:
            await self._serve(scope, receive, send)
            return
        with tracing.continuing(request_headers(scope)):
            await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        response, body, unchecked = await self._guard(scope, receive)
        if response is not None:
            await response(scope, receive, send)
            return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body or b"", "more_body": False}
            return await receive()

        if unchecked is None:
            await self.session_manager.handle_request(scope, replay, send)
            return
        raw_token, tool = unchecked
        start: Message | None = None
        chunks: list[bytes] = []

        async def send_answer(message: Message) -> None:
            # The SDK answers a tools/call with one JSON response: held until it is whole,
            # then let out unless it is a refusal (or was made before any token check).
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
                return
            if message["type"] != "http.response.body" or start is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            answer = b"".join(chunks)
            refusal = await _answer(answer, raw_token, tool)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            await send(start)
            await send({"type": "http.response.body", "body": answer})

        await self.session_manager.handle_request(scope, replay, send_answer)

    async def _guard(
        self, scope: Scope, receive: Receive
    ) -> tuple[ASGIApp | None, bytes | None, tuple[str, str] | None]:
        """The answer (a refusal, or a batch's), or the body to replay to the SDK and, for a
        single tool call whose token is left to the handler, that token and tool."""
        headers = request_headers(scope)
        if not _host_allowed(headers.get("host", "")):
            return _plain_error(421, "Invalid Host header"), None, None
        origin = headers.get("origin")
        if origin is not None and not _origin_allowed(origin):
            return _plain_error(403, "Origin not allowed"), None, None

        if scope["method"] == "GET":
            # No stream is ever offered (contract 7): the server is stateless and answers
            # every POST with one JSON response, so an open SSE stream would only hold a
            # connection (and a file descriptor) forever.
            response = _plain_error(405, "This server offers no stream: send each message as a POST")
            response.headers["Allow"] = "POST"
            return response, None, None

        body = await _read_body(receive, headers.get("content-length")) if scope["method"] == "POST" else b""
        if body is None:
            return _plain_error(413, f"Request body exceeds {MAX_BODY_BYTES} bytes"), None, None

        raw_token = _bearer_token(headers)
        if raw_token is None:
            codex_metrics.token_refused("missing")
            hint = "Send the access token in the Authorization header"
            if b"access_token=" in scope.get("query_string", b""):
                hint += "; tokens in the query string are not accepted"
            return _auth_error(401, error=None, description=hint, scopes=ALL_SCOPES), None, None

        # A 2026-07-28 call names its tool in a header: no need to parse its body here.
        message = None if headers.get("mcp-method") == "tools/call" and headers.get("mcp-name") else _parse(body)
        names = _called_tools(headers, message)
        if _is_single_tool_call(headers, message, names) and versions.supported(headers):
            # The tool handler checks the token, afresh, right before the service.
            scope[auth.TOKEN_SCOPE_KEY] = auth.token_checksum(raw_token)
            return None, body, (raw_token, names[0])
        if message is None:
            message = _parse(body)

        refusal, grant = await _check_token(raw_token, names)
        if refusal is not None:
            return refusal, None, None
        if refusal := versions.unsupported_version_response(headers, message):
            return refusal, None, None
        if isinstance(message, list):
            if refusal := batch_refusal(headers, message):
                return refusal, None, None
            scope[auth.GRANT_SCOPE_KEY] = grant
            # Answered message by message, each through the SDK as if posted alone.
            return batch_answer(self.session_manager.handle_request, message), None, None
        if message is not None and (problem := envelope_problem(message)):
            return error_response(request_id(message), problem), None, None
        scope[auth.GRANT_SCOPE_KEY] = grant
        return None, versions.counter_offer(body, message), None


async def protected_resource_metadata_view(request: Request) -> Response:
    return JSONResponse(
        protected_resource_metadata(),
        headers={"Access-Control-Allow-Origin": "*", "Cache-Control": "public, max-age=3600"},
    )


@contextlib.asynccontextmanager
async def _lifespan(session_manager: StreamableHTTPSessionManager) -> AsyncIterator[None]:
    try:
        async with session_manager.run():
            yield
    finally:
        tracing.flush()


def build_mcp_http_app() -> Starlette:
    """The SDK side of the site: /mcp (stateless, JSON responses) and the resource metadata."""
    server = create_server()
    session_manager = StreamableHTTPSessionManager(
        app=server,
        json_response=True,
        stateless=True,
        # Host and Origin are checked by GuardedMCPApp against Django's settings.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=MAX_BODY_BYTES,
    )
    guarded = GuardedMCPApp(session_manager)
    return Starlette(
        routes=[
            *(Route(path, endpoint=guarded, methods=["GET", "POST", "DELETE"]) for path in sorted(ENDPOINT_PATHS)),
            Route(PRM_PATH, endpoint=protected_resource_metadata_view, methods=["GET"]),
            Route(PRM_ROOT_PATH, endpoint=protected_resource_metadata_view, methods=["GET"]),
        ],
        # CORS for browser-based clients on CODEX_ALLOWED_ORIGINS; preflights need no token.
        middleware=[Middleware(OriginGuardingCORSMiddleware)],
        lifespan=lambda app: _lifespan(session_manager),
    )


# Everything the MCP side serves: the endpoint and its resource metadata.
MCP_PATHS = ENDPOINT_PATHS | {PRM_PATH, PRM_ROOT_PATH}
