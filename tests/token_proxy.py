"""A reverse proxy on 127.0.0.1 that adds a bearer token to every request, for clients that
send none (the conformance suite): it forwards method, path, query, headers (Host and Origin as
they came) and body to the server behind it, and its answer back."""

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.live import ThreadedServer

# Hop-by-hop headers and those the proxy sets itself.
_NOT_FORWARDED = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "authorization"})


class TokenProxy(ThreadedServer):
    def __init__(self, upstream: str, token: str) -> None:
        methods = ["GET", "POST", "DELETE", "OPTIONS", "PUT"]
        super().__init__(Starlette(routes=[Route("/{path:path}", self.forward, methods=methods)]), lifespan="off")
        self.upstream = upstream
        self.token = token

    async def forward(self, request: Request) -> Response:
        headers = [(name, value) for name, value in request.headers.items() if name not in _NOT_FORWARDED]
        headers.append(("authorization", f"Bearer {self.token}"))
        async with httpx2.AsyncClient(timeout=60) as client:
            answer = await client.request(
                request.method,
                self.upstream + request.url.path,
                params=request.url.query or None,
                headers=headers,
                content=await request.body(),
            )
        kept = {
            name: value for name, value in answer.headers.items() if name not in _NOT_FORWARDED | {"content-encoding"}
        }
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    def __enter__(self) -> "TokenProxy":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
