"""The documents that show this server before anyone connects: the server card at
``<mcp>/server-card`` and the AI Catalog at ``/.well-known/ai-catalog.json`` that lists it.

Both come from the identity record (``mcp_endpoint.identity``) and describe the server, nothing
of anyone: no token is asked for, and none is looked at. They are served by the Starlette app of
``mcp_endpoint.http`` as routes of their own, beside the protected-resource metadata, never
through the guard of ``/mcp``: these endpoints call nothing of the SDK, whatever a request sends
(any method but GET, HEAD and OPTIONS is Starlette's 405).

As the server-card extension asks (docs/discovery.md of modelcontextprotocol/
experimental-ext-server-card, a draft): open to every origin (``Access-Control-Allow-Origin: *``,
and a preflight answered for any origin, since a catalog's page may be anywhere; the card is
public and read-only), cacheable (``Cache-Control: public``, an ``ETag``, ``If-None-Match``
answered 304), and served as ``application/mcp-server-card+json``. The ``Host`` header is checked
as on ``/mcp`` (421), by the rule ``mcp_endpoint.http`` passes in.

What a stranger can make them do: render nothing (each document is made once per configuration
and kept, bytes and tag), compare a header with one tag, and send a few hundred bytes. No rate
limit: counting a request in the shared cache would cost more than answering it.
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.conf import settings
from pydantic_core import to_json
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from mcp_endpoint import identity

# The Streamable HTTP endpoint (contract 7: /mcp) plus the suffix the extension reserves.
SERVER_CARD_PATH = "/mcp" + identity.SERVER_CARD_SUFFIX
AI_CATALOG_PATH = "/.well-known/ai-catalog.json"
PATHS = frozenset({SERVER_CARD_PATH, AI_CATALOG_PATH})

# The extension's CORS headers for a hosted card: any origin may read it, revalidate it with
# If-None-Match, and see its ETag.
CORS_HEADERS = {
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET",
    "Access-Control-Allow-Headers": "Content-Type, If-None-Match",
    "Access-Control-Expose-Headers": "ETag",
}
PREFLIGHT_MAX_AGE_SECONDS = 600


@dataclass(frozen=True)
class Document:
    body: bytes
    etag: str
    media_type: str


_FACES: dict[str, tuple[Callable[[identity.Instance], dict[str, Any]], str]] = {
    SERVER_CARD_PATH: (identity.server_card, identity.SERVER_CARD_MEDIA_TYPE),
    AI_CATALOG_PATH: (identity.ai_catalog, identity.AI_CATALOG_MEDIA_TYPE),
}


@lru_cache(maxsize=8)
def _rendered(path: str, instance: identity.Instance, static_url: str) -> Document:
    # static_url is part of the key because the icons' URLs are made from it.
    face, media_type = _FACES[path]
    body = to_json(face(instance))
    return Document(body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"', media_type)


def document(path: str) -> Document:
    """The document served at ``path`` for the configured instance."""
    return _rendered(path, identity.Instance.configured(), settings.STATIC_URL)


def not_modified(if_none_match: str | None, etag: str) -> bool:
    """RFC 9110 §13.1.2: ``*`` or any listed tag that matches by weak comparison."""
    if if_none_match is None:
        return False
    return any(tag == "*" or tag.removeprefix("W/") == etag for tag in map(str.strip, if_none_match.split(",")))


def _answer(request: Request, path: str) -> Response:
    if request.method == "OPTIONS":
        return Response(
            status_code=204, headers={**CORS_HEADERS, "Access-Control-Max-Age": str(PREFLIGHT_MAX_AGE_SECONDS)}
        )
    served = document(path)
    headers = {
        **CORS_HEADERS,
        "Cache-Control": f"public, max-age={identity.DESCRIPTION_MAX_AGE_SECONDS}",
        "ETag": served.etag,
    }
    if not_modified(request.headers.get("if-none-match"), served.etag):
        return Response(status_code=304, headers=headers)
    return Response(served.body, media_type=served.media_type, headers=headers)


def routes(host_allowed: Callable[[str], bool]) -> list[Route]:
    """The routes of both documents, refusing a ``Host`` that ``host_allowed`` refuses (421)."""

    def endpoint_for(path: str) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            if not host_allowed(request.headers.get("host", "")):
                return JSONResponse({"error": "Invalid Host header"}, status_code=421)
            return _answer(request, path)

        return endpoint

    return [Route(path, endpoint=endpoint_for(path), methods=["GET", "HEAD", "OPTIONS"]) for path in sorted(PATHS)]
