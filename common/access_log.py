"""The access log: one line per HTTP request (logger ``codex.access``, INFO), made as the
answer's last bytes are sent (or when the request ends without one), with the method,
the path (query values dropped), the status, the duration and the client's address; for a
tool call, the same line also carries the tool, its outcome, the codex, the person, the
application, the entry, the JSON-RPC request id and the trace id (``mcp_endpoint.calls``).

One line per request, not an access line and a tool-call line: each line costs a call CPU,
and the tool call's line needs the status and the duration the access line has. uvicorn's
own access line (``uvicorn.access``) is left at WARNING in ``settings.LOGGING``, so it never
writes: it has no duration, and its arguments would have to be rewritten to drop query values.

A tool call finds the line through the request's ASGI scope (``line_of``) and adds its
fields with ``ToolCallLine.add``. A second tool call in one request (a JSON-RPC batch of an
old protocol version) or a call served without this middleware writes its own line
(``mcp_endpoint.calls``).

No line carries a query string's values, a header, a body, a token or a cookie: which
parameters came stays visible, what they said does not. What a stranger chose (the path, the
query's names, a JSON-RPC id, a metadata document's client id, an address from a proxy's header)
is kept here as it came: the formatter escapes it on either path (``codex_site.logs.one_line``).

The line is logged as any record is, except where the logging machinery would change
nothing: when ``codex.access`` has no filter of its own and its records reach one plain
stream (or file) handler that passes INFO, whose filters all let an access line through
unchanged (``passes_access_lines``) and whose formatter can render a line from its fields
(``render_fields``: either formatter of ``codex_site.logs``), the line waits as its values,
with the lines of other requests (``_Pending``), and is rendered without a ``LogRecord`` and
written to that handler's stream under its lock at most ``FLUSH_SECONDS`` after it was made,
with the time it was made. That is the default set-up in either ``CODEX_LOG_FORMAT``, where
the record, its handling, its formatting and a write per line cost a tool call several times
what the line itself does (docs/performance.md). Any other handler, filter or formatter that
an operator configures gets the record, at once.
"""

import asyncio
import atexit
import logging
import re
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Protocol

logger = logging.getLogger("codex.access")

SCOPE_KEY = "codex.access_line"

_QUERY_VALUE = re.compile(r"=[^&;]*")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[dict]], Callable[[dict], Awaitable[None]]], Awaitable[None]]


def without_query_values(target: str) -> str:
    """``/o/authorize/?client_id=a&state=b`` -> ``/o/authorize/?client_id=&state=``."""
    path, mark, query = target.partition("?")
    return path + mark + _QUERY_VALUE.sub("=", query) if mark else target


class ToolCallLine:
    """The tool call fields of one request's access line (the first call's)."""

    __slots__ = ("fields",)

    def __init__(self) -> None:
        self.fields: dict[str, Any] | None = None

    def add(self, fields: dict[str, Any]) -> bool:
        """Take a tool call's fields; False if the line already has a call's (log it apart)."""
        if self.fields is not None:
            return False
        self.fields = fields
        return True


def line_of(scope: Scope) -> ToolCallLine | None:
    """The access line of the request whose scope this is, if the middleware is in front."""
    return scope.get(SCOPE_KEY)


class StatusCounter(Protocol):
    """What counts the answers of some paths (the metrics' ``/mcp`` answers by status:
    ``codex_metrics.ResponseCounter``), through this middleware's wrapper of ``send``."""

    def watches(self, scope: Scope) -> bool: ...

    def count(self, status: int) -> None: ...


def access_logged(app: ASGIApp, counter: StatusCounter | None = None) -> ASGIApp:
    """ASGI middleware: one ``codex.access`` line per HTTP request, and each answer's status
    given to ``counter`` where it ``watches`` the request. One wrapper of ``send`` serves
    both: each wrapper is an await per message of every request. With INFO off for the
    logger and nothing to count, requests pass straight through."""

    async def logged(scope: Scope, receive, send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        lines = logger.isEnabledFor(logging.INFO)
        counting = counter is not None and counter.watches(scope)
        if not (lines or counting):
            await app(scope, receive, send)
            return
        started = time.perf_counter()
        line = ToolCallLine()
        if lines:
            scope[SCOPE_KEY] = line
        status = 0
        written = not lines

        def write() -> None:
            nonlocal written
            written = True
            _write(scope, status, time.perf_counter() - started, line.fields)

        async def send_noted(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                if counting:
                    counter.count(status)
            elif not written and message["type"] == "http.response.body" and not message.get("more_body", False):
                # Before the answer's last bytes leave: the duration is the server's.
                write()
            await send(message)

        try:
            await app(scope, receive, send_noted)
        except BaseException:
            # The server answers 500 if nothing was sent yet; the error is logged where it
            # happened, so this line names only the request.
            status = status or 500
            raise
        finally:
            if not written:
                write()

    return logged


def direct_handler() -> logging.StreamHandler | None:
    """The handler an access line may be written to directly (see the module's docstring),
    or None. Looked up for every line, so that a change of configuration (or a test's
    ``assertLogs``) takes effect on the next one; the walk is a few attribute reads."""
    if logger.filters:
        return None
    found = None
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if found is not None:
                return None
            found = handler
        if not current.propagate:
            break
        current = current.parent
    if (
        found is None
        or type(found) not in (logging.StreamHandler, logging.FileHandler)
        or found.stream is None  # a delayed file handler opens its file on its first record
        or found.level > logging.INFO
        or not hasattr(found.formatter, "render_fields")
        or not all(getattr(each, "passes_access_lines", False) for each in found.filters)
    ):
        return None
    return found


class _Pending:
    """Direct lines not yet written, rendered and written together: when ``BATCH_LINES`` are
    waiting, at the latest ``FLUSH_SECONDS`` after the first of them (a timer on the event
    loop that served it), at once for a line made outside an event loop, and at exit
    (``atexit``). A line waits as its values (``_Line``): rendering a batch in one loop costs a
    request several times less than rendering each line among the request's own work, and
    one write system call per line would give the interpreter lock away on every request (as
    nginx's ``access_log ... buffer= flush=``, for the same reason)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lines: list[_Line] = []
        self.handler: logging.StreamHandler | None = None
        self.timer_loop: asyncio.AbstractEventLoop | None = None

    def add(self, handler: logging.StreamHandler, line: "_Line") -> None:
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self.lock:
            if self.handler is not handler:
                self._write_locked()
                self.handler = handler
            self.lines.append(line)
            now = loop is None or len(self.lines) >= BATCH_LINES
            # A timer on a loop that has stopped since would never fire: set one on this loop.
            timer = not now and (
                self.timer_loop is None or self.timer_loop.is_closed() or not self.timer_loop.is_running()
            )
            if now:
                self._write_locked()
            elif timer:
                self.timer_loop = loop
        if timer:
            loop.call_later(FLUSH_SECONDS, self.write)

    def write(self) -> None:
        with self.lock:
            self._write_locked()

    def _write_locked(self) -> None:
        self.timer_loop = None
        lines, handler = self.lines, self.handler
        if not lines or handler is None:
            return
        self.lines = []
        render = handler.formatter.render_fields  # type: ignore[union-attr]
        texts = []
        for line in lines:
            message, fields = line.message_and_fields()
            try:
                texts.append(render("INFO", logger.name, message, fields, created=line.created))
            except Exception:
                # A value the formatter cannot write costs this line alone, not its batch: as
                # a record, it is the handler's to report (``handleError``).
                logger.info(message, extra=fields)
        terminator = handler.terminator
        handler.acquire()
        try:
            handler.stream.write(terminator.join(texts) + terminator)
            handler.flush()
        except Exception:
            # A broken stream is the handler's to report (``handleError``), through a record.
            handler.release()
            for text in texts:
                logger.info(text)
            return
        handler.release()


BATCH_LINES = 64
FLUSH_SECONDS = 0.1
_pending = _Pending()
atexit.register(_pending.write)


def flush() -> None:
    """Write the direct lines still waiting (tests, and a server that stops)."""
    _pending.write()


class _Line:
    """One request's line as its values, made when the answer is sent: rendered then (as a
    record), or when its batch is written (``_Pending``)."""

    __slots__ = ("call", "client", "created", "duration_ms", "method", "path", "status")

    def __init__(self, method: str, path: str, status: int, duration_ms: float, client: str | None, call) -> None:
        self.method, self.path, self.status, self.duration_ms = method, path, status, duration_ms
        self.client, self.call = client, call
        self.created = time.time()  # the line's time, as a record's ``created``

    def message_and_fields(self) -> tuple[str, dict[str, Any]]:
        method, path, status, duration_ms, call = self.method, self.path, self.status, self.duration_ms, self.call
        fields = {"method": method, "path": path, "status": status, "duration_ms": duration_ms, "client": self.client}
        if call is None:
            return f"{method} {path} {status} in {duration_ms:.1f} ms", fields
        # The request's duration_ms includes the call's, which is the tool's own.
        fields.update(call, duration_ms=duration_ms, tool_duration_ms=call["duration_ms"])
        message = (
            f"{method} {path} {status} in {duration_ms:.1f} ms: tool call {call['tool']} {call['outcome']}"
            f" (codex {call['codex_id']}, person {call['user_id']}, client {call['client_id']},"
            f" entry {call['entry_id']}, request {call['request_id']}, trace {call['trace_id']})"
        )
        return message, fields


def _write(scope: Scope, status: int, seconds: float, call: dict[str, Any] | None) -> None:
    method, path = scope.get("method", ""), scope.get("path", "")
    query = scope.get("query_string", b"")
    if query:
        path = without_query_values(f"{path}?{query.decode('latin-1')}")
    client = scope.get("client")
    line = _Line(method, path, status, round(seconds * 1000, 3), f"{client[0]}:{client[1]}" if client else None, call)
    handler = direct_handler()
    if handler is None:
        message, fields = line.message_and_fields()
        logger.info(message, extra=fields)
        return
    _pending.add(handler, line)
