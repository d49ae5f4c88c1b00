"""CORS for the SDK side of the site (/mcp and the protected-resource metadata).

Starlette's CORSMiddleware, with this server's origin rule (``common.origins``)
and two changes so that it stays a DNS-rebinding guard too: a preflight from an origin
that is not allowed gets 403 (not Starlette's 400 with CORS headers), and responses to
such origins carry no CORS headers at all. The guard in ``mcp_endpoint.http`` then
refuses their requests with 403. Preflights never need a token.

The public documents (``mcp_endpoint.discovery``: the server card and the catalog) are open to
every origin, as their extension asks, and answer their own CORS: they pass through untouched.
"""

from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from common.origins import origin_allowed
from mcp_endpoint.discovery import PATHS as OPEN_PATHS

# What MCP clients send from a browser: the bearer token, JSON, the Streamable HTTP
# headers of every protocol era, and resumption (Last-Event-ID).
ALLOW_HEADERS = (
    "Accept",
    "Authorization",
    "Content-Type",
    "Last-Event-ID",
    "Mcp-Method",
    "Mcp-Name",
    "Mcp-Protocol-Version",
    "Mcp-Session-Id",
)
# What a browser client must be able to read: the challenge naming the resource metadata
# and scopes, the MCP response headers, and how long to wait after a 503 or 429.
EXPOSE_HEADERS = ("WWW-Authenticate", "Mcp-Session-Id", "Mcp-Protocol-Version", "Retry-After")
ALLOW_METHODS = ("GET", "POST", "DELETE", "OPTIONS")


class OriginGuardingCORSMiddleware(CORSMiddleware):
    def __init__(self, app: ASGIApp) -> None:
        super().__init__(
            app,
            allow_methods=ALLOW_METHODS,
            allow_headers=ALLOW_HEADERS,
            expose_headers=EXPOSE_HEADERS,
            max_age=600,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    def is_allowed_origin(self, origin: str) -> bool:
        return origin_allowed(origin)

    def preflight_response(self, request_headers: Headers) -> Response:
        if not self.is_allowed_origin(request_headers["origin"]):
            return JSONResponse({"error": "Origin not allowed"}, status_code=403)
        return super().preflight_response(request_headers)

    async def send(self, message: Message, send: Send, request_headers: Headers) -> None:
        origin = request_headers.get("origin")
        if message["type"] == "http.response.start" and origin is not None and not self.is_allowed_origin(origin):
            # No CORS headers for an origin that is not allowed; also drop any a view set
            # (the resource metadata answers "*" for GETs without an Origin-sensitive body).
            headers = MutableHeaders(scope=message)
            for name in [key for key in headers if key.startswith("access-control-")]:
                del headers[name]
            await send(message)
            return
        await super().send(message, send, request_headers)
