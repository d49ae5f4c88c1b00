"""A reverse proxy on 127.0.0.1 that adds a bearer token to every request, for clients that
send none (the conformance suite): it forwards method, path, query, headers (Host and Origin as
they came) and body to the server behind it, and its answer back."""

import socket
import threading
import time

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

# Hop-by-hop headers and those the proxy sets itself.
_NOT_FORWARDED = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive", "authorization"})


class TokenProxy:
    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream
        self.token = token
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"

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
        methods = ["GET", "POST", "DELETE", "OPTIONS", "PUT"]
        app = Starlette(routes=[Route("/{path:path}", self.forward, methods=methods)])
        config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the token proxy did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.socket.close()
