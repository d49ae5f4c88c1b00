"""OpenTelemetry traces, configured only from the standard ``OTEL_*`` variables.

Off unless ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``: OTLP over HTTP/protobuf;
``console``) or an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``); ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` keeps it off. Off, nothing of the SDK is imported: the MCP SDK's
own middleware and the spans below run on the API's no-op tracer, and the spans below are
not even started. Everything else (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_BSP_*``) the SDK and the
exporter read themselves.

One trace per call: the MCP SDK's ``OpenTelemetryMiddleware`` makes the SERVER span
(``tools/call field_notes_save``, with ``mcp.method.name``, ``gen_ai.tool.name`` and
``jsonrpc.request.id``), continuing the client's W3C ``traceparent`` from ``_meta``, or
else from the HTTP headers (``mcp_endpoint.http`` attaches that context). Under it:
``codex.token_check``, ``codex.service``, and one CLIENT span per SQL statement named by
its operation (``SELECT``, ``INSERT``...). No span carries an argument, a statement's text
or parameters, a token or a cookie: ids, names and codes only.

Off, that middleware is entered only for a message that continues a client's trace
(``WhileTracing``): on the API's no-op tracer its span records nothing, and the trace's id in
the tool call's log line is all it gives; entering it cost 2 to 5 % of a tool call's CPU
(docs/performance.md).

Names outside documented APIs (the first two in ``common.internals``):

- the MCP SDK's ``mcp.server._otel.OpenTelemetryMiddleware``, which ``Server`` puts in its
  (provisional) ``middleware`` list by default: the MCP span is its, not ours;
- Django's ``connection.execute_wrappers``, the list behind the documented
  ``connection.execute_wrapper()`` context manager: ``statement_span`` is appended to it for
  the life of each connection (``notebook.transactions`` reads it too);
- uvicorn's re-raising of the signal that stopped it (hence ``flush`` at the lifespan's end).
"""

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from mcp.shared._otel import extract_trace_context
from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

EXPORTERS = ("otlp", "console")
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SERVICE_NAME = "agent-codex"
# uvicorn is not in common.internals' register (Django, DOT, the MCP SDK); its two behaviours
# relied on here and in codex_site.logs are checked against this version by tests/test_tracing.py.
UVICORN_VERSION_CHECKED = "0.54.0"

_tracer = trace.get_tracer("agent-codex")
_OFF = contextlib.nullcontext()
enabled = False
# The provider configure_from_environment installed (not a test's): flushed at shutdown.
_configured: Any = None


class TracingMisconfigured(ValueError):
    """An ``OTEL_*`` value this server cannot honour; the message says which."""


def span(name: str, attributes: Mapping[str, Any] | None = None, kind: trace.SpanKind = trace.SpanKind.INTERNAL):
    """A child span of the current one while tracing is on; otherwise a shared no-op."""
    if not enabled:
        return _OFF
    return _tracer.start_as_current_span(name, kind=kind, attributes=attributes, record_exception=False)


class WhileTracing:
    """A server middleware (the SDK's ``(ctx, call_next)``, its span middleware inside) that runs
    while tracing is on, read on each message as ``span`` reads it, or when the message continues
    a client's trace (a ``traceparent`` in its ``_meta``, read as the SDK reads it): off, the span
    records nothing, but the context it makes current carries that trace's id to the tool call's
    log line (``mcp_endpoint.calls``). Any other message goes straight on."""

    def __init__(self, middleware: Callable[..., Any]) -> None:
        self.middleware = middleware

    async def __call__(self, ctx: Any, call_next: Callable[..., Any]) -> Any:
        if not enabled and extract_trace_context(ctx.meta) is None:
            return await call_next(ctx)
        return await self.middleware(ctx, call_next)


@contextlib.contextmanager
def continuing(headers: Mapping[str, str]) -> Iterator[None]:
    """The client's trace context from the HTTP headers (``traceparent``, ``tracestate``)
    as the current one: the MCP span's parent unless the message's ``_meta`` names one."""
    token = otel_context.attach(propagate.extract(headers))
    try:
        yield
    finally:
        otel_context.detach(token)


def exporters_wanted(environ: Mapping[str, str]) -> list[str]:
    """The exporters the environment asks for: empty when tracing is off."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = [item.strip().lower() for item in environ.get("OTEL_TRACES_EXPORTER", "").split(",") if item.strip()]
    if not named:
        return ["otlp"] if any(environ.get(variable, "").strip() for variable in ENDPOINT_VARIABLES) else []
    if named == ["none"]:
        return []
    if unknown := [item for item in named if item not in EXPORTERS]:
        raise TracingMisconfigured(f"OTEL_TRACES_EXPORTER {unknown[0]!r} is not one of otlp, console, none")
    protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    if "otlp" in named and protocol and protocol.strip() != "http/protobuf":
        raise TracingMisconfigured(f"OTEL_EXPORTER_OTLP_PROTOCOL {protocol!r}: only http/protobuf is installed")
    return named


def configure_from_environment(service_version: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Install the SDK's tracer provider with the exporters the environment names, or
    nothing at all. Whether tracing is on."""
    try:
        wanted = exporters_wanted(environ)
    except TracingMisconfigured as error:
        sys.exit(f"Agent Codex refuses to start: {error}")
    if not wanted:
        return False
    # Only now: with tracing off, the SDK is never imported.
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create({"service.version": service_version})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    provider = TracerProvider(resource=resource)  # the sampler from OTEL_TRACES_SAMPLER
    for name in wanted:
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        else:
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
    install(provider)
    global _configured
    _configured = provider
    return True


def flush() -> None:
    """Export the spans still batched. At the ASGI lifespan's end: uvicorn ends the process by
    re-raising the signal that stopped it, so the SDK's own flush at exit never runs."""
    if _configured is not None:
        _configured.force_flush()


def install(provider: Any = None) -> None:
    """Make ``provider`` the process's tracer provider (once per process: OpenTelemetry
    refuses a second) and start this project's spans; without one, start them again on the
    provider already installed (for tests, after ``uninstall``)."""
    global enabled
    from django.db.backends.signals import connection_created

    if provider is not None:
        trace.set_tracer_provider(provider)
    connection_created.connect(_trace_statements, dispatch_uid="codex-tracing")
    enabled = True


def uninstall() -> None:
    """Stop this project's spans (for tests: the provider itself cannot be taken back)."""
    global enabled
    from django.db.backends.signals import connection_created

    connection_created.disconnect(dispatch_uid="codex-tracing")
    enabled = False


def _trace_statements(sender: Any, connection: Any, **kwargs: Any) -> None:
    """connection_created: every connection of the process runs its statements through
    ``statement_span``, the writer connection of ``notebook.transactions`` included."""
    if statement_span not in connection.execute_wrappers:
        connection.execute_wrappers.append(statement_span)


def statement_span(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    """A Django execute wrapper: one CLIENT span per statement, named by its operation; none
    under a span that is not recorded (a call the sampler left out, or no call at all)."""
    if not enabled or not trace.get_current_span().is_recording():
        return execute(sql, params, many, context)
    operation = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else "SQL"
    attributes = {"db.system.name": context["connection"].vendor, "db.operation.name": operation}
    with _tracer.start_as_current_span(operation, kind=trace.SpanKind.CLIENT, attributes=attributes):
        return execute(sql, params, many, context)


def passes_straight_on(wrappers: list[Callable[..., Any]]) -> bool:
    """Whether Django's execute ``wrappers`` would hand a statement run now straight on:
    there are none, or only ``statement_span`` while no span is recorded (tracing off, or a
    call the sampler left out). The fast path then gives the statement to the driver itself
    (``notebook.sql.driver``), as it does with tracing off."""
    if not wrappers:
        return True
    return all(wrapper is statement_span for wrapper in wrappers) and not (
        enabled and trace.get_current_span().is_recording()
    )


# Installed on every connection, so it sees the writer connection's statements as well:
# notebook.transactions need not write on a thread's own connection for it to see them.
statement_span.on_every_connection = True  # type: ignore[attr-defined]
