"""The HTTP face of the MCP endpoint: request guards, bearer-token checks, and the
RFC 9728 protected-resource metadata. ``codex_site.asgi`` routes to ``mcp_http_app``.

Before any token: CORS preflight (``mcp_endpoint.cors``: answered for allowed origins, 403
for others), Host (421), Origin (403), body size (413, before any parsing) and a missing
bearer token (401 with the challenge). Everything else is answered only once the request's
token has been checked (contract 8): the guard puts the token in the ASGI scope
(``auth.RequestToken``), answers the request into a held answer (405 to any method but POST,
a protocol version's 400, a batch, or the SDK's stateless Streamable HTTP transport, whose
tool handlers check the token right before their services), then takes the first check's
outcome, checking the token itself if nothing did. A refused token is answered 401/403/503
with the challenge, in place of whatever the held answer said; otherwise the held answer goes
out. Which route a request takes depends on what it sent; whether its token is checked never
does.
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

import codex_metrics
from common import tracing
from common.origins import origin_allowed
from mcp_endpoint import auth, discovery, versions
from mcp_endpoint.auth import ALL_SCOPES
from mcp_endpoint.batches import batch_answer, batch_refusal
from mcp_endpoint.boundary import run_sync
from mcp_endpoint.cors import OriginGuardingCORSMiddleware
from mcp_endpoint.envelopes import envelope_problem, error_response, request_id
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


def _tokens_unavailable() -> Response:
    response = _plain_error(503, "The server cannot check tokens right now; retry shortly")
    response.headers["Retry-After"] = "5"
    return response


def _refusal_response(refusal: auth.Refusal) -> Response:
    """The HTTP answer to a request whose first token check refused."""
    if refusal.status == 401:
        return _auth_error(401, error="invalid_token", description=refusal.description, scopes=ALL_SCOPES)
    if refusal.status == 403:
        return _auth_error(403, error="insufficient_scope", description=refusal.description, scopes=refusal.needed)
    return _tokens_unavailable()  # the check logged the outage


async def _refusal_of(token: auth.RequestToken) -> Response | None:
    """The refusal to answer in place of the request's held answer, or None: the request's
    first check, made here if nothing made it while answering."""
    outcome = token.first
    if outcome is None:
        with tracing.span("codex.token_check"):
            outcome = await run_sync(token.check)
    return _refusal_response(outcome) if isinstance(outcome, auth.Refusal) else None


class _HeldAnswer:
    """What an answer sends, kept until the request's token has been checked. Every answer
    here is finite: the SDK answers each POST with one JSON response (stateless, JSON
    responses), and no stream is offered."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def send(self, message: Message) -> None:
        self.messages.append(message)

    async def release(self, send: Send) -> None:
        for message in self.messages:
            await send(message)


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
        headers = request_headers(scope)
        refusal, raw_token, body = await _before_the_token(scope, receive, headers)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        message = _parse(body)
        token = auth.RequestToken(auth.token_checksum(raw_token), _scopes_needed(message))
        scope[auth.TOKEN_SCOPE_KEY] = token
        held = _HeldAnswer()
        await self._answer(scope, receive, held.send, headers, body, message)
        if refusal := await _refusal_of(token):
            await refusal(scope, receive, send)
            return
        await held.release(send)

    async def _answer(
        self, scope: Scope, receive: Receive, send: Send, headers: Mapping[str, str], body: bytes, message: Any
    ) -> None:
        """The answer to a request whose token the guard holds: ours, or the SDK's."""
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
            # Answered message by message, each through the SDK as if posted alone.
            ours = batch_refusal(headers, message) or batch_answer(self.session_manager.handle_request, message)
        if ours is None and message is not None and (problem := envelope_problem(message)):
            ours = error_response(request_id(message), problem)
        if ours is not None:
            await ours(scope, receive, send)
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
    raw_token = _bearer_token(headers)
    if raw_token is None:
        codex_metrics.token_refused("missing")
        hint = "Send the access token in the Authorization header"
        if b"access_token=" in scope.get("query_string", b""):
            hint += "; tokens in the query string are not accepted"
        return _auth_error(401, error=None, description=hint, scopes=ALL_SCOPES), "", b""
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
    guarded = GuardedMCPApp(session_manager)
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
