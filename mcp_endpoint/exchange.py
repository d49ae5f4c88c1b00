"""One JSON-RPC request, one answer, through the SDK's dispatch kernel: the seam where the
endpoint uses the SDK below its public transport (each use registered in common/internals.py).

The SDK's Streamable HTTP transport (``StreamableHTTPSessionManager.handle_request``) takes a
POST's bytes: it parses them again after the guard has, validates the envelope again, answers
through a per-request transport and dispatcher (handshake versions) or its single-exchange
entry (2026-07-28), and validates and dumps again the result the tool handler built from the
project's own schemas. Here a request the transport would dispatch as it is goes straight to
the kernel every transport ends in (``mcp.server.runner.serve_one``), with the message the guard
parsed, and its answer is written once:

- ``route`` says whether the transport would dispatch the message without answering anything
  of its own first, and how: a JSON-RPC request (not ``initialize``, not
  ``subscriptions/listen``) with a JSON content type and an Accept that takes JSON, in a version
  the endpoint serves, and, in 2026-07-28, routing headers that pass the SDK's own ladder
  (``classify_inbound_request``) and no ``Mcp-Param-*`` schema to check. Anything else (a
  notification, a refused header, a handshake) goes through the SDK's transport.
- ``answer`` dispatches it as the transport would (the version's connection, the request as
  the handler's context) and writes the result or the error as that version's transport writes
  it: 2026-07-28's JSON text with the status its error code maps to, the handshake versions'
  pydantic JSON with 200. A ``tools/call`` goes through the server's middleware alone
  (``tool_call``), which is all of the kernel a tool call here uses: the per-request session,
  connection and teardown around them cost a tenth of a get's CPU and serve a handler that
  never sends anything back.
- ``ServedToolResults``, a server middleware, hands a ``tools/call`` result on in the wire form
  the SDK's per-version result schema would give it (``mcp_endpoint.results`` builds it so),
  instead of the SDK validating and dumping it again; the request is validated as the SDK
  validates it.

``CODEX_FAST_PATH=0`` turns both off: every message then goes through the SDK's transport and
every result through its validation. ``tests/test_mcp_exchange.py`` sends the same requests to
a server each way, in every protocol version, and compares the answers byte for byte.
"""

import codecs
import functools
import gc
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import orjson
from django.conf import settings
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.lowlevel.server import lifespan as default_lifespan
from mcp.server.runner import _extract_meta as extract_meta
from mcp.server.runner import modern_error_data, serve_one
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundLadderRejection,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data, progress_token_from_params
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import INTERNAL_ERROR, METHOD_NOT_FOUND, SERVER_INFO_META_KEY, ErrorData
from mcp_types import methods as sdk_methods
from starlette.requests import Request
from starlette.types import Receive, Scope

from mcp_endpoint import versions
from mcp_endpoint.auth import TokenRefused

logger = logging.getLogger(__name__)

JSON = "application/json"
# Methods the transports answer in their own way (the handshake inline, a listen as a stream).
_TRANSPORTS_OWN = frozenset({"initialize", "subscriptions/listen"})


def on() -> bool:
    """Whether the seam serves (the fast path's switch: ``CODEX_FAST_PATH``, read on each request)."""
    return settings.CODEX_FAST_PATH


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer as the transport would send it: the status, the body, its headers' style."""

    status: int
    body: bytes
    error: bool  # a JSON-RPC error: a tool call's own token check may not have been reached
    media_type: str | None = JSON  # None: the handshake transport's explicit Content-Type header

    def response_headers(self) -> dict[str, str] | None:
        return None if self.media_type is not None else {"Content-Type": JSON}


@dataclass
class _DispatchContext:
    """The dispatch context of one exchange (``mcp.shared.dispatcher.DispatchContext``): nothing
    can be sent back but the answer (JSON responses carry no stream for notifications, and no
    server-to-client request has a way back in a stateless exchange)."""

    transport: TransportContext
    request_id: types.RequestId
    message_metadata: ServerMessageMetadata
    progress_token: types.ProgressToken | None = None
    cancel_requested: anyio.Event = field(default_factory=anyio.Event)
    can_send_request: bool = False

    async def send_raw_request(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        return None  # a JSON response has nowhere to carry it (as in the SDK's JSON-response mode)

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


class Exchange:
    """The fast lane for one server: ``route`` and ``answer`` (the module's docstring)."""

    def __init__(self, server: Server[Any]) -> None:
        self.server = server
        # The state the session manager's run() enters the server's lifespan for: the SDK's
        # default lifespan (create_server passes none), which yields an empty dict.
        assert server.lifespan is default_lifespan, "the kernel would need the lifespan's own state"
        self.lifespan_state: dict[str, Any] = {}

    def route(self, scope: Scope, headers: Mapping[str, str], message: Any) -> "Route | None":
        """How the SDK's transport would hand ``message`` (whose envelope passed
        ``envelopes.envelope_problem``) to its kernel without answering first, or None."""
        if not on() or not isinstance(message, dict) or "method" not in message or not versions.supported(headers):
            return None
        if type(message.get("id")) not in (int, str) or message["method"] in _TRANSPORTS_OWN:
            return None  # a notification, or an id the envelope's model would have converted
        content_type = headers.get("content-type")
        if content_type is None or not content_type.lower().startswith(JSON):
            return None
        if not check_accept_headers(_RequestHeaders(headers))[0]:
            return None
        requested = versions.requested_version(headers)
        if not versions.modern(requested):
            return Route(requested, None)
        if find_duplicated_routing_header((name.decode("latin-1"), "") for name, _ in scope["headers"]):
            return None
        verdict = classify_inbound_request(message, headers=headers)
        if isinstance(verdict, InboundLadderRejection):
            return None
        params = message.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        lookup = self.server.get_tool_input_schema
        if message["method"] == "tools/call" and isinstance(name, str) and lookup is not None and lookup(name):
            return None  # Mcp-Param-* headers to check against the schema
        return Route(requested, verdict)

    async def answer(self, scope: Scope, receive: Receive, route: "Route", message: dict) -> Answer:
        """Dispatch a message along its ``route``; its answer as its version's transport writes
        it. A ``TokenRefused`` that a tool call raises for the guard passes through."""
        request = Request(scope, receive)
        request_id, method, params = message["id"], message["method"], message.get("params")
        modern = route.verdict is not None
        try:
            if method == "tools/call":
                result = await self.tool_call(request, route.protocol_version, request_id, params)
            else:
                result = await self.kernel(request, route, request_id, method, params)
        except MCPError as error:
            return _error(request_id, error.error, modern=modern)
        except TokenRefused:
            raise  # the request's refusal, which the guard answers
        except Exception as error:
            if modern:
                return _error(request_id, modern_error_data(error), modern=True)
            data = handler_exception_to_error_data(error)
            if data is None:
                logger.exception("handler for %r raised", method)
                data = ErrorData(code=0, message=str(error))
            return _error(request_id, data, modern=False)
        if modern:
            # The single-exchange entry's write (a model dumped in JSON mode, then json.dumps):
            # the result is JSON data already (the kernel's dump, or ServedToolResults').
            return Answer(200, json_written({"jsonrpc": "2.0", "id": request_id, "result": result}), error=False)
        reply = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=result)
        return Answer(200, reply.model_dump_json(by_alias=True, exclude_unset=True).encode(), False, None)

    async def kernel(
        self, request: Request, route: "Route", request_id: types.RequestId, method: str, params: Any
    ) -> dict[str, Any]:
        """The message through the kernel, with the version's connection and the request as the
        handler's context, as the version's transport hands it over."""
        if route.verdict is not None:
            verdict = route.verdict
            connection = Connection.from_envelope(
                route.protocol_version, verdict.client_info, verdict.client_capabilities
            )
            transport = TransportContext(kind="streamable-http", can_send_request=False, headers=request.headers)
            metadata = ServerMessageMetadata(request_context=request)
        else:
            connection = Connection.from_envelope(route.protocol_version, None, None)
            transport = TransportContext(kind="streamable-http", can_send_request=False)
            metadata = ServerMessageMetadata(request_context=request, can_send_request=False)
        context = _DispatchContext(transport, request_id, metadata, progress_token_from_params(params))
        return await serve_one(
            self.server, context, method, params, connection=connection, lifespan_state=self.lifespan_state
        )

    async def tool_call(
        self, request: Request, version: str, request_id: types.RequestId, params: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """A ``tools/call`` through the server's middleware alone, as the kernel runs it (the
        SDK's span while tracing is on or the message continues a trace, then
        ``ServedToolResults``, which validates the request as the kernel does and answers it),
        without the rest of the kernel around them: the per-request session and its
        connection's teardown, which a tool handler here never uses (it sends nothing back: a
        JSON response has no way to carry it)."""
        ctx: ServerRequestContext[Any, Any] = ServerRequestContext(
            session=None,  # type: ignore[arg-type]  # no handler here reads it (the docstring)
            lifespan_context=self.lifespan_state,
            protocol_version=version,
            method="tools/call",
            params=params,
            request_id=request_id,
            meta=extract_meta(params),  # the span's trace context, read as the kernel reads it
            request=request,
        )
        call: CallNext = _unanswered
        for middleware in reversed(self.server.middleware):
            call = functools.partial(middleware, call_next=call)
        return await call(ctx)


async def _unanswered(ctx: ServerRequestContext[Any, Any]) -> HandlerResult:
    """Past the last middleware: ``ServedToolResults`` answers every tools/call it is given
    while the fast path is on, so reaching here is a switch turned in mid-request."""
    raise MCPError(code=INTERNAL_ERROR, message="tools/call was not answered")


@dataclass(frozen=True, slots=True)
class Route:
    """A message's way to the kernel: its protocol version (a handshake version's, as the header
    or its absence says) and, in 2026-07-28, the SDK's verdict on its envelope."""

    version: str
    verdict: InboundModernRoute | None

    @property
    def protocol_version(self) -> str:
        """The version the message is served in (the connection's): 2026-07-28's from its envelope."""
        return self.verdict.protocol_version if self.verdict is not None else self.version


def _error(request_id: types.RequestId, error: ErrorData, *, modern: bool) -> Answer:
    reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
    if not modern:
        return Answer(200, reply.model_dump_json(by_alias=True, exclude_unset=True).encode(), True, None)
    body = reply.model_dump(mode="json", by_alias=True, exclude_none=True)
    status = ERROR_CODE_HTTP_STATUS.get(error.code, 200)
    return Answer(status, json_written(body), error=True)


def json_written(value: Any) -> bytes:
    """``json.dumps(value, separators=(",", ":")).encode()``, the single-exchange entry's write of
    an answer (compact, every character past ASCII escaped), written by orjson where its bytes
    are provably the same: several times faster on a search's page, which is written twice (as
    structured content and as its JSON text).

    On dicts, lists, strings, integers, booleans and None the two writers differ only where
    orjson refuses (an integer past 64 bits, a lone surrogate: the json module writes it then),
    in U+007F (only the json module escapes it: the json module writes it too) and in
    characters past ASCII, which orjson writes as UTF-8 and which are then escaped as the json
    module escapes them (``_ascii_escaped``). Anything else, a float first of all (orjson spells
    1e-05 as 0.00001, and NaN as null), goes to the json module. ``tests/test_mcp_exchange.py``
    holds the two to the same bytes for any JSON value.
    """
    try:
        written = orjson.dumps(value)  # first: it refuses a cycle, where a walk would not end
    except orjson.JSONEncodeError:
        return json.dumps(value, separators=(",", ":")).encode()
    if b"\x7f" in written or not _plain(value):
        return json.dumps(value, separators=(",", ":")).encode()
    if not written.isascii():
        return written.decode().encode("ascii", _ASCII_ESCAPED)
    return written


# What orjson and the json module write alike (exact types: a subclass may be written otherwise).
_PLAIN = frozenset({dict, list, tuple, str, int, bool, type(None)})


def _plain(value: Any) -> bool:
    """Whether ``value`` is made of dicts, lists and tuples of strings, integers, booleans and None
    alone. Walked level by level with ``gc.get_referents`` (a dict's values, a list's or a tuple's
    items: what these types' traversal visits; strings and numbers have none), so that the loop
    over a search page's few hundred values runs in C; a level holding any other type ends it
    before anything of that type is traversed."""
    level = [value]
    while level:
        if not _PLAIN.issuperset(map(type, level)):
            return False
        level = gc.get_referents(*level)
    return True


def _ascii_escaped(error: UnicodeEncodeError) -> tuple[str, int]:
    """A run of characters past ASCII as ``json.dumps`` escapes them: ``\\u`` and four lower-case
    hex digits, a character past U+FFFF as its UTF-16 surrogate pair (a codec error handler)."""
    escaped = []
    for character in error.object[error.start : error.end]:
        code = ord(character)
        if code > 0xFFFF:
            code -= 0x10000
            escaped.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
        else:
            escaped.append(f"\\u{code:04x}")
    return "".join(escaped), error.end


_ASCII_ESCAPED = "codex.json-ascii-escaped"
codecs.register_error(_ASCII_ESCAPED, _ascii_escaped)


class _RequestHeaders:
    """What ``check_accept_headers`` reads of a request: its headers (a name -> value mapping)."""

    __slots__ = ("headers",)

    def __init__(self, headers: Mapping[str, str]) -> None:
        self.headers = headers


class ServedToolResults:
    """A server middleware (``Server.middleware``, which sees notifications too) for a
    ``tools/call`` request: the request validated as the SDK's kernel validates it, the handler
    called, and its result handed on as served,
    ``mcp_endpoint.results`` having built it in the version's wire form; 2026-07-28 results get
    the kernel's ``serverInfo`` stamp. Every other method, and every call with the fast path
    off, goes through the kernel as ever."""

    def __init__(self, server: Server[Any], handler: Any) -> None:
        self.handler = handler
        self.stamp = server.server_info_stamp  # a dump of its identity, fixed at construction
        assert server.cache_hints.get("tools/call") is None, "the kernel would add a cache hint to each result"

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method != "tools/call" or ctx.request_id is None or not on():
            # (A tools/call sent as a notification asks for nothing: the kernel drops it.)
            return await call_next(ctx)
        version, params = ctx.protocol_version, ctx.params
        try:
            sdk_methods.validate_client_request("tools/call", version, params)
        except KeyError:
            raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="tools/call") from None
        typed = types.CallToolRequestParams.model_validate({} if params is None else params, by_name=False)
        result = await self.handler(ctx, typed)
        if versions.modern(version):
            result["_meta"] = {SERVER_INFO_META_KEY: self.stamp}
        return result
