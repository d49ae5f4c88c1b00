"""OpenTelemetry traces: the client's trace continued by the SDK's MCP span, the token check,
the service and the statements under it, and nothing secret in any span; off (no SDK
provider at all) unless the OTEL_* variables ask for it."""

import asyncio
import datetime as dt
import http.server
import json
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test import SimpleTestCase, TestCase, TransactionTestCase, override_settings
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from authserver.core.tokens import mint_access_token
from codex_site.settings import public_url_settings
from common import tracing
from notebook.sql import driver
from tests.http_client import MODERN, call_tool, post, rpc_body
from tests.live import BOTH_SCOPES, LiveServerTestCase
from tests.mcp_client import success_of, with_client
from tests.planted import every_tool, planted_entry, planted_strings
from tests.server_process import ROOT, ServerProcess, database_environment, server_environment


class Switch(Sampler):
    """Samples while a tracing test runs: the process's provider cannot be taken back, and
    the rest of the suite should not fill the exporter."""

    on = False

    def should_sample(self, *args, **kwargs):
        return (ALWAYS_ON if self.on else ALWAYS_OFF).should_sample(*args, **kwargs)

    def get_description(self) -> str:
        return "tests.test_tracing.Switch"


SWITCH = Switch()
EXPORTER = InMemorySpanExporter()
_installed = False


def record_spans() -> None:
    """The SDK's provider with the in-memory exporter, installed once per test process."""
    global _installed
    if not _installed:
        provider = TracerProvider(sampler=SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
        tracing.install(provider)
        _installed = True
    else:
        tracing.install()
    SWITCH.on = True


def stop_recording() -> None:
    SWITCH.on = False
    tracing.uninstall()
    EXPORTER.clear()


def client_context() -> SpanContext:
    return SpanContext(secrets.randbits(128) | 1, secrets.randbits(64) | 1, False, TraceFlags(TraceFlags.SAMPLED))


def everything_in(span) -> str:
    """A span's name, attributes, events, links, status and resource, as one text to grep."""
    parts = [span.name, str(span.status.description)]
    parts += [f"{key}={value}" for key, value in span.attributes.items()]
    parts += [f"{key}={value}" for key, value in span.resource.attributes.items()]
    for event in span.events:
        parts += [event.name] + [f"{key}={value}" for key, value in event.attributes.items()]
    for link in span.links:
        parts += [f"{key}={value}" for key, value in (link.attributes or {}).items()]
    return "\n".join(parts)


class TracingTests(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.token = self.token_for(self.alice)
        record_spans()
        self.addCleanup(stop_recording)
        EXPORTER.clear()

    def spans_of_trace(self, trace_id: int) -> list:
        return [span for span in EXPORTER.get_finished_spans() if span.context.trace_id == trace_id]

    def test_the_mcp_span_continues_the_clients_trace_and_holds_the_token_check_service_and_statements(self):
        parent = client_context()

        async def save(client):
            entry = {"content": "a traced note"}
            return success_of(await client.call_tool("field_notes_save", {"requestId": "t-1", "entry": entry}))

        with trace.use_span(NonRecordingSpan(parent)):  # sent as traceparent in _meta
            with_client(self.mcp_url, self.token, "auto", save)

        spans = self.spans_of_trace(parent.trace_id)
        by_id = {span.context.span_id: span for span in spans}
        # The SDK client's own span (this process has the SDK provider) carries the context over.
        (sent,) = [span for span in spans if span.name == "MCP send tools/call field_notes_save"]
        self.assertEqual(sent.parent.span_id, parent.span_id)
        (mcp,) = [span for span in spans if span.name == "tools/call field_notes_save"]
        self.assertEqual(mcp.kind, SpanKind.SERVER)
        self.assertEqual(mcp.parent.span_id, sent.context.span_id)
        self.assertEqual(mcp.attributes["gen_ai.tool.name"], "field_notes_save")
        (check,) = [span for span in spans if span.name == "codex.token_check"]
        (service,) = [span for span in spans if span.name == "codex.service"]
        self.assertEqual(check.parent.span_id, mcp.context.span_id)
        self.assertEqual(service.parent.span_id, mcp.context.span_id)
        statements = [span for span in spans if span.kind == SpanKind.CLIENT and "db.operation.name" in span.attributes]
        under = {by_id[span.parent.span_id].name for span in statements}
        self.assertLessEqual({"codex.token_check", "codex.service"}, under)
        inserts = [
            span for span in statements if span.name == "INSERT" and span.parent.span_id == service.context.span_id
        ]
        self.assertTrue(inserts)
        self.assertEqual(inserts[0].attributes["db.system.name"], connection.vendor)

    def test_without_meta_the_http_traceparent_is_continued(self):
        parent = client_context()
        traceparent = f"00-{parent.trace_id:032x}-{parent.span_id:016x}-01"
        body = rpc_body("tools/call", {"name": "field_notes_search", "arguments": {}}, version=MODERN)
        response = post(self.mcp_url, body, token=self.token, version=MODERN, headers={"traceparent": traceparent})
        self.assertEqual(response.status_code, 200)
        (mcp,) = [span for span in self.spans_of_trace(parent.trace_id) if span.kind == SpanKind.SERVER]
        self.assertEqual(mcp.name, "tools/call field_notes_search")
        self.assertEqual(mcp.parent.span_id, parent.span_id)

    def test_no_span_carries_note_text_tokens_or_cookies(self):
        planted = {**planted_strings("cookie"), "token": self.token}
        entry = planted_entry(planted)
        headers = {"Cookie": f"sessionid={planted['cookie']}"}
        with_client(self.mcp_url, self.token, "auto", lambda client: every_tool(client, planted))
        # A batch-less older client's call that the HTTP guard checks, with a cookie on it.
        response = post(self.mcp_url, rpc_body("tools/list"), token=self.token, headers=headers)
        self.assertEqual(response.status_code, 200)
        # Arguments that break the schema (a refusal whose message names the path, not the value).
        bad = {"requestId": "bad", "entry": {**entry, "unknown": planted["content"]}}
        self.assertEqual(call_tool(self.mcp_url, self.token, "field_notes_save", bad).status_code, 200)
        # A refused token.
        self.assertEqual(call_tool(self.mcp_url, self.token + "x", "field_notes_get", {"id": "x"}).status_code, 401)

        spans = EXPORTER.get_finished_spans()
        names = {span.name for span in spans}
        self.assertLessEqual({"tools/call field_notes_update", "codex.service", "codex.token_check"}, names)
        for span in spans:
            text = everything_in(span)
            for name, value in planted.items():
                self.assertNotIn(value, text, f"the {name} reached the span {span.name}")


class WhileTracingTests(SimpleTestCase):
    """The SDK's span middleware is entered while tracing is on, or for a message that continues
    a client's trace (its id goes to the tool call's log line); otherwise not at all."""

    TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

    def passes(self, meta) -> list[str]:
        passed: list[str] = []

        async def span(ctx, call_next):
            passed.append("span")
            return await call_next(ctx)

        async def inner(ctx):
            passed.append("inner")
            return {"ctx": ctx}

        ctx = SimpleNamespace(meta=meta)
        result = asyncio.run(tracing.WhileTracing(span)(ctx, inner))
        self.assertEqual(result, {"ctx": ctx})
        return passed

    def test_off_a_message_goes_straight_on(self) -> None:
        self.assertFalse(tracing.enabled)
        self.assertEqual(self.passes(None), ["inner"])
        self.assertEqual(self.passes({"protocolVersion": "2026-07-28"}), ["inner"])
        self.assertEqual(self.passes({"traceparent": "not a trace"}), ["inner"])

    def test_off_a_message_that_continues_a_trace_goes_through_the_span(self) -> None:
        self.assertFalse(tracing.enabled)
        self.assertEqual(self.passes({"traceparent": self.TRACEPARENT}), ["span", "inner"])

    def test_on_every_message_goes_through_the_span(self) -> None:
        tracing.install()
        try:
            self.assertEqual(self.passes(None), ["span", "inner"])
        finally:
            tracing.uninstall()


class TracingConfigurationTests(SimpleTestCase):
    def provider_in_a_server_process(self, environ: dict[str, str]) -> subprocess.CompletedProcess:
        code = (
            "import codex_site.asgi, sys; from opentelemetry import trace; "
            "print(type(trace.get_tracer_provider()).__name__, 'opentelemetry.sdk' in sys.modules)"
        )
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            env=server_environment("http://127.0.0.1:9", Path(tempfile.gettempdir()), environ),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def test_without_otel_variables_no_sdk_is_even_imported(self):
        done = self.provider_in_a_server_process({})
        self.assertEqual(done.stdout.split(), ["ProxyTracerProvider", "False"], done.stderr)

    def test_an_exporter_in_the_environment_installs_the_sdk(self):
        done = self.provider_in_a_server_process({"OTEL_TRACES_EXPORTER": "console"})
        self.assertEqual(done.stdout.split(), ["TracerProvider", "True"], done.stderr)

    def test_the_choice_of_exporter(self):
        self.assertEqual(tracing.exporters_wanted({}), [])
        self.assertEqual(tracing.exporters_wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}), ["otlp"])
        self.assertEqual(tracing.exporters_wanted({"OTEL_TRACES_EXPORTER": "none"}), [])
        disabled = {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}
        self.assertEqual(tracing.exporters_wanted(disabled), [])
        with self.assertRaisesRegex(tracing.TracingMisconfigured, "zipkin"):
            tracing.exporters_wanted({"OTEL_TRACES_EXPORTER": "zipkin"})
        with self.assertRaisesRegex(tracing.TracingMisconfigured, "grpc"):
            tracing.exporters_wanted({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})

    def test_an_unknown_exporter_refuses_to_start(self):
        done = self.provider_in_a_server_process({"OTEL_TRACES_EXPORTER": "zipkin"})
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("OTEL_TRACES_EXPORTER 'zipkin'", done.stderr)


class Collector:
    """An OTLP/HTTP receiver on 127.0.0.1: the spans of every ExportTraceServiceRequest."""

    def __init__(self) -> None:
        self.spans: list = []
        self.lock = threading.Lock()
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                request = ExportTraceServiceRequest.FromString(self.rfile.read(int(self.headers["Content-Length"])))
                with collector.lock:
                    for resource in request.resource_spans:
                        for scope in resource.scope_spans:
                            collector.spans += [(resource.resource, span) for span in scope.spans]
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class OtlpExportTests(TransactionTestCase):
    def test_a_server_configured_by_otel_variables_exports_its_spans_over_otlp(self):
        collector = Collector()
        self.addCleanup(collector.close)
        directory = Path(tempfile.mkdtemp(prefix="codex-otlp-"))
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        environ = {
            **database_environment(),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            "OTEL_SERVICE_NAME": "codex-under-test",
        }
        server = ServerProcess(directory, environ)
        alice = get_user_model().objects.create_user("alice")
        with override_settings(**public_url_settings(server.base_url)):
            token = mint_access_token(user=alice, scopes=BOTH_SCOPES, lifetime=dt.timedelta(hours=1))
        server.start()
        try:
            response = call_tool(server.base_url + "/mcp", token, "field_notes_search", {})
            self.assertEqual(response.status_code, 200)
            self.assertFalse(json.loads(response.text)["result"]["isError"])
        finally:
            server.stop()  # a graceful stop flushes the batch of spans
        names = {span.name for _, span in collector.spans}
        self.assertLessEqual({"tools/call field_notes_search", "codex.token_check", "codex.service"}, names)
        services = {
            attribute.value.string_value
            for resource, _ in collector.spans
            for attribute in resource.attributes
            if attribute.key == "service.name"
        }
        self.assertEqual(services, {"codex-under-test"})


class UnsampledStatementsTests(TestCase):
    """While traces are on, a statement of a call the sampler left out goes straight to the
    driver, as with traces off; a sampled call's goes through Django's cursor and its span."""

    def test_only_a_sampled_calls_statements_go_through_djangos_cursor(self) -> None:
        record_spans()
        self.addCleanup(stop_recording)
        database = connections[DEFAULT_DB_ALIAS]
        database.ensure_connection()
        if tracing.statement_span not in database.execute_wrappers:
            # What connection_created does for every connection opened while traces are on.
            database.execute_wrappers.append(tracing.statement_span)
            self.addCleanup(database.execute_wrappers.remove, tracing.statement_span)
        tracer = trace.get_tracer("tests")
        with mock.patch.object(database, "cursor", wraps=database.cursor) as django_cursor:
            SWITCH.on = False
            with tracer.start_as_current_span("left out by the sampler"):
                self.assertEqual(driver.run(database, "SELECT 1", [], driver.fetchone), (1,))
            self.assertFalse(django_cursor.called)
            self.assertEqual(EXPORTER.get_finished_spans(), ())
            SWITCH.on = True
            with tracer.start_as_current_span("sampled"):
                self.assertEqual(driver.run(database, "SELECT 1", [], driver.fetchone), (1,))
            self.assertTrue(django_cursor.called)
        statements = [span.name for span in EXPORTER.get_finished_spans() if span.kind == SpanKind.CLIENT]
        self.assertEqual(statements, ["SELECT"])


class InternalsTests(SimpleTestCase):
    """What common.tracing and codex_site.logs rely on beyond documented APIs (the Django and
    SDK names are in common.internals' register, whose test checks their versions)."""

    def test_uvicorn_is_the_version_its_access_log_arguments_and_signal_handling_were_checked_against(self):
        import uvicorn

        self.assertEqual(uvicorn.__version__, tracing.UVICORN_VERSION_CHECKED)

    def test_the_sdk_server_still_makes_the_mcp_span_with_its_own_middleware(self):
        from mcp.server._otel import OpenTelemetryMiddleware

        from mcp_endpoint.exchange import ServedToolResults
        from mcp_endpoint.server import create_server

        # The SDK's own span stays the outermost (while tracing is on); inside it, the seam that
        # serves tool results.
        span, served = create_server().middleware
        self.assertIsInstance(span, tracing.WhileTracing)
        self.assertIsInstance(span.middleware, OpenTelemetryMiddleware)
        self.assertIsInstance(served, ServedToolResults)
