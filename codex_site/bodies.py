"""Request bodies, bounded in front of everything the ASGI application serves.

Django's ASGI handler reads a whole body (into memory, then a temporary file) before any
view runs, so a view's own size check comes too late: a client declaring a terabyte and
sending six bytes held a worker task for as long as it liked. ``BodyLimit`` wraps the
router (``codex_site.asgi``) and, for every HTTP request:

- answers 413 at once, without handing anything on, when ``Content-Length`` is over the
  path's limit (``limit_for``);
- counts what arrives and stops reading once the limit is passed (a chunked body has no
  ``Content-Length``): the application gets at most one message more than the limit,
  then is told the client went away, and the client gets 413;
- gives the whole body ``CODEX_BODY_TIMEOUT_SECONDS`` to arrive from the moment the
  request's headers did; past that the application is told the client went away, and
  the client gets 408.

A 413 keeps the connection open (``LINGER_MAX_BYTES``): a client that sends its whole body
without waiting for an answer, as most do, is still sending when the 413 goes out, and a
server that then closed with the rest unread would make the kernel reset the connection; the
reset can reach the client before it reads the answer, which is then lost. uvicorn reads and
discards what is left of a body once the answer to it is complete, and closes a connection
that is idle past its keep-alive timeout (``CODEX_KEEPALIVE_SECONDS``) from the answer on: the
lingering close that nginx makes, bounded in time. The connection is closed with the answer
when lingering cannot help: a client waiting for ``100 Continue`` sends nothing more, and a
body declared past ``LINGER_MAX_BYTES`` is not worth reading; so does a 408, whose client has
stopped sending.

Once the body is complete, ``receive`` is passed through untouched (Django and the SDK
then wait on it for the client's disconnect, which must not time out). uvicorn has no
timeout for a request's *headers*: a connection whose headers never finish is closed only
by a proxy in front (nginx's ``client_header_timeout``, ``deploy/nginx/``).
"""

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from django.conf import settings

from common.inputs import ascii_int
from mcp_endpoint.http import ENDPOINT_PATHS
from notebook.limits import IMPORT_FORM_OVERHEAD_BYTES, MAX_BODY_BYTES

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

IMPORT_PATH = "/codex/import/"
# The largest declared body whose rest is read and discarded after a 413, so that its client
# reads the answer: the import's limit twice over (a larger one is closed at once).
LINGER_MAX_BYTES = 64 * 1024 * 1024


def limit_for(path: str) -> int:
    """The largest body accepted on ``path``, in bytes."""
    if path in ENDPOINT_PATHS:  # the contract's limit (section 7), not a setting
        return MAX_BODY_BYTES
    if path == IMPORT_PATH:
        return settings.CODEX_IMPORT_MAX_BYTES + IMPORT_FORM_OVERHEAD_BYTES
    return settings.CODEX_BODY_MAX_BYTES


def _header(scope: Scope, name: bytes) -> bytes | None:
    return next((value for key, value in scope.get("headers", ()) if key == name), None)


def _refusal(scope: Scope, status: int, message: str, close: bool) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A short answer for a client that is not told anything else: HTML for a browser, JSON
    otherwise; ``close``: the connection closes with it (else the server reads on)."""
    accept = _header(scope, b"accept") or b""
    if b"text/html" in accept:
        title = "Request too large" if status == 413 else "Request timed out"
        body = f"<!doctype html><title>{title}</title><h1>{title}</h1><p>{message}</p>".encode()
        content_type = b"text/html; charset=utf-8"
    else:
        error = "request_too_large" if status == 413 else "request_timeout"
        body = json.dumps({"error": error, "error_description": message}).encode()
        content_type = b"application/json"
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    return headers, body


def _lingers(scope: Scope, declared: int) -> bool:
    """Whether the rest of a body refused unread is worth reading (the module's docstring)."""
    expect = _header(scope, b"expect")
    if expect is not None and expect.lower() == b"100-continue":
        return False
    return declared <= LINGER_MAX_BYTES


async def _answer(scope: Scope, send: Send, status: int, message: str, *, close: bool = True) -> None:
    headers, body = _refusal(scope, status, message, close)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class BodyLimit:
    """ASGI middleware: the limits above, for every HTTP request of the wrapped application."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = limit_for(scope.get("path", ""))
        declared = _header(scope, b"content-length")
        if declared is not None:
            length = ascii_int(declared.decode("latin-1"), max_value=10**30)
            if length is not None and length > limit:
                message = f"The request body is over the limit of {limit} bytes."
                await _answer(scope, send, 413, message, close=not _lingers(scope, length))
                return

        timeout = settings.CODEX_BODY_TIMEOUT_SECONDS
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        received = 0
        complete = False
        refused: int | None = None
        started = False

        async def bounded_receive() -> Message:
            nonlocal received, complete, refused
            if complete:
                return await receive()
            if refused is not None:
                return {"type": "http.disconnect"}
            # What asyncio.timeout does, without a context object per message (every request
            # pays this): a timer that cancels this task if the message has not come by the
            # deadline.
            task = asyncio.current_task()
            expired = False

            def expire() -> None:
                nonlocal expired
                expired = True
                task.cancel()

            timer = loop.call_at(deadline, expire)
            try:
                message = await receive()
            except asyncio.CancelledError:
                if not expired:
                    raise  # cancelled for another reason (the client left, the server stops)
                task.uncancel()
                refused = 408
                return {"type": "http.disconnect"}
            finally:
                timer.cancel()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    # Handed on as if more were coming, so that an application counting
                    # for itself (the MCP guard) answers its own 413; the next receive
                    # says the client went away.
                    refused = 413
                    return {**message, "more_body": True}
                if not message.get("more_body", False):
                    complete = True
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, bounded_receive, watched_send)
        if refused is not None and not started:
            if refused == 413:
                # A chunked body (a declared one is refused above), which its client is sending.
                await _answer(scope, send, 413, f"The request body is over the limit of {limit} bytes.", close=False)
            else:
                await _answer(scope, send, 408, f"The request body did not arrive within {timeout} seconds.")
