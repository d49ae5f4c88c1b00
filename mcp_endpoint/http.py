"""The HTTP face of the MCP endpoint: request guards, bearer-token checks, and the
RFC 9728 protected-resource metadata. ``codex_site.asgi`` routes to ``mcp_http_app``.

Before any token: CORS preflight (``mcp_endpoint.cors``: answered for allowed origins, 403
for others), Host (421), Origin (403) and body size (413, before any parsing). Then the token,
first, whatever the method, headers or body (contract 8): a request without one gets the 401
challenge; every other request's token is checked before anything is answered, by the guard
(``_checked``: one query in a worker thread) or, for a request that is one tool call, by that
call's first step (the call's check and the request's are then one query, in the hop that runs
the service: ``auth.RequestToken.answers_request``). A refusal is one class from the check to
the answer (``auth.TokenRefused``: 401, 403 or 503 with the challenge). Past the check the
request takes its route: 405 for any method but POST, a protocol version's 400, a batch, or the
message, parsed once, through the SDK's kernel (``mcp_endpoint.exchange``) or its transport.
"""

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from django.conf import settings
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

from common import tracing
from common.inputs import ascii_int, bearer_credential
from common.origins import origin_allowed
from mcp_endpoint import auth, discovery, versions
from mcp_endpoint.auth import ALL_SCOPES, TokenMissing, TokenRefused
from mcp_endpoint.batches import ServeAlone, batch_answer, batch_refusal, through_the_transport
from mcp_endpoint.boundary import run_sync
from mcp_endpoint.cors import OriginGuardingCORSMiddleware
from mcp_endpoint.envelopes import envelope_problem, error_response, request_id
from mcp_endpoint.exchange import Answer, Exchange
from mcp_endpoint.server import create_server
from mcp_endpoint.tools import scopes_for
from notebook.limits import MAX_BODY_BYTES

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


def _scopes_needed(message: Any) -> frozenset[str]:
    """What the tools/call messages of the body (one message, or a batch) need, by the body
    alone: whatever the headers say, the SDK serves the body."""
    messages = message if isinstance(message, list) else [message]
    needed: set[str] = set()
    for item in messages:
        if isinstance(item, dict) and item.get("method") == "tools/call":
            params = item.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            needed |= scopes_for(name if isinstance(name, str) else "")
    return frozenset(needed)


def refusal_response(refused: TokenRefused) -> Response:
    """The HTTP answer to a request whose token was refused: 401 or 403 with the challenge
    (a 403's names the scopes its check asked for), or 503 with ``Retry-After`` (the check
    logged the outage)."""
    if refused.status == 503:
        response = _plain_error(503, refused.description)
        response.headers["Retry-After"] = "5"
        return response
    scopes = refused.needed if refused.status == 403 else ALL_SCOPES
    return _auth_error(refused.status, error=refused.error, description=refused.description, scopes=scopes)


async def _checked(token: auth.RequestToken) -> None:
    """Check the request's token (one query, in a worker thread); a refusal is raised."""
    with tracing.span("codex.token_check"):
        await run_sync(token.check)


def _one_tool_call(scope: Scope, message: Any) -> bool:
    """Whether the request is one tools/call request (not a batch, not a notification)."""
    return scope["method"] == "POST" and isinstance(message, dict) and message.get("method") == "tools/call"


def _origin_allowed(origin: str) -> bool:
    return origin_allowed(origin)  # localhost, 127.0.0.1 and [::1] on one port are one origin


def _host_allowed(host: str) -> bool:
    domain, _port = split_domain_port(host)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


async def _read_body(receive: Receive, declared: str | None) -> bytes | None:
    """The whole body, or None once it exceeds MAX_BODY_BYTES (checked before parsing)."""
    declared_bytes = ascii_int(declared, max_value=2**63 - 1)
    if declared_bytes is not None and declared_bytes > MAX_BODY_BYTES:
        return None
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
    """ASGI app for /mcp: the guards, then the SDK (its kernel through ``exchange``, or its transport)."""

    def __init__(self, session_manager: StreamableHTTPSessionManager, exchange: Exchange) -> None:
        self.session_manager = session_manager
        self.exchange = exchange

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not tracing.enabled:
            await self._serve(scope, receive, send)
            return
        with tracing.continuing(request_headers(scope)):
            await self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = request_headers(scope)
        refusal, raw_token, body = await _before_the_token(scope, receive, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        message = _parse(body)
        # One tool call that the kernel takes checks the token as its first step, in the hop that
        # runs its service, and raises a refusal for this guard: the request's check and the
        # call's are one query. Any other request's token is checked here, before anything else.
        one_call = _one_tool_call(scope, message) and envelope_problem(message) is None
        route = self.exchange.route(scope, headers, message) if one_call else None
        token = auth.RequestToken(
            auth.token_checksum(raw_token), _scopes_needed(message), answers_request=route is not None
        )
        scope[auth.TOKEN_SCOPE_KEY] = token
        try:
            if route is not None:
                answer = await self.exchange.answer(scope, receive, route, message)
                if answer.error:
                    await _checked(token)  # answered before the call's check was reached
                await _send(answer, scope, receive, send)
                return
            await _checked(token)
        except TokenRefused as refused:
            await refusal_response(refused)(scope, receive, send)
            return
        await self._answer(scope, receive, send, headers, body, message)

    async def _answer(
        self, scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str], body: bytes, message: Any
    ) -> None:
        """The answer to a request whose token has been checked: ours, or the SDK's."""
        if scope["method"] != "POST":
            # Messages come as POSTs, and no stream is ever offered (contract 7): the server
            # is stateless and answers every POST with one JSON response, so an open SSE
            # stream would only hold a connection (and a file descriptor) forever; it keeps
            # no session for a DELETE to end.
            no_stream = "This server offers no stream: " if scope["method"] == "GET" else ""
            response = _plain_error(405, f"{no_stream}send each message as a POST")
            response.headers["Allow"] = "POST"
            await response(scope, receive, send)
            return
        ours: ASGIApp | None = versions.unsupported_version_response(headers, message)
        if ours is None and isinstance(message, list):
            # Answered message by message, each as if posted alone.
            ours = batch_refusal(headers, message) or batch_answer(self._alone(headers), message)
        if ours is None and message is not None and (problem := envelope_problem(message)):
            ours = error_response(request_id(message), problem)
        if ours is not None:
            await ours(scope, receive, send)
            return
        if route := self.exchange.route(scope, headers, message):
            await _send(await self.exchange.answer(scope, receive, route, message), scope, receive, send)
            return
        body = versions.counter_offer(body, message)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.session_manager.handle_request(scope, replay, send)

    def _alone(self, headers: Mapping[str, str]) -> ServeAlone:
        """How a batch's message is answered as if posted alone: through the kernel when it takes
        the message, else through the SDK's transport."""

        async def serve(scope: Scope, receive: Receive, message: Any) -> tuple[int, bytes]:
            if route := self.exchange.route(scope, headers, message):
                answer = await self.exchange.answer(scope, receive, route, message)
                return answer.status, answer.body
            return await through_the_transport(self.session_manager.handle_request, scope, receive, message)

        return serve


async def _send(answer: Answer, scope: Scope, receive: Receive, send: Send) -> None:
    response = Response(answer.body, answer.status, headers=answer.response_headers(), media_type=answer.media_type)
    await response(scope, receive, send)


async def _before_the_token(
    scope: Scope, receive: Receive, headers: Mapping[str, str]
) -> tuple[Response | None, str, bytes]:
    """``(refusal, "", b"")`` for what is answered before any token (Host, Origin, body size, no
    token), else ``(None, the token, the body)``."""
    if not _host_allowed(headers.get("host", "")):
        return _plain_error(421, "Invalid Host header"), "", b""
    origin = headers.get("origin")
    if origin is not None and not _origin_allowed(origin):
        return _plain_error(403, "Origin not allowed"), "", b""
    body = await _read_body(receive, headers.get("content-length")) if scope["method"] == "POST" else b""
    if body is None:
        return _plain_error(413, f"Request body exceeds {MAX_BODY_BYTES} bytes"), "", b""
    raw_token = bearer_credential(headers.get("authorization"))
    if raw_token is None:
        hint = "Send the access token in the Authorization header"
        if b"access_token=" in scope.get("query_string", b""):
            hint += "; tokens in the query string are not accepted"
        return refusal_response(TokenMissing(hint)), "", b""
    return None, raw_token, body


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
    guarded = GuardedMCPApp(session_manager, Exchange(server))
    return Starlette(
        routes=[
            # Every method reaches the guard: none is answered before its token is checked.
            *(Route(path, endpoint=guarded) for path in sorted(ENDPOINT_PATHS)),
            Route(PRM_PATH, endpoint=protected_resource_metadata_view, methods=["GET"]),
            Route(PRM_ROOT_PATH, endpoint=protected_resource_metadata_view, methods=["GET"]),
            # The server card and the AI Catalog: public, never through the guard, never the SDK.
            *discovery.routes(_host_allowed),
        ],
        # CORS for browser-based clients on CODEX_ALLOWED_ORIGINS; preflights need no token.
        middleware=[Middleware(OriginGuardingCORSMiddleware)],
        lifespan=lambda app: _lifespan(session_manager),
    )


# Everything the MCP side serves: the endpoint, its resource metadata, its card and the catalog.
MCP_PATHS = ENDPOINT_PATHS | {PRM_PATH, PRM_ROOT_PATH} | discovery.PATHS
