"""What the log says of a tool call: the tool, its outcome (``ok`` or the contract's error
code), its duration, the codex, the person (``user_id``), the application (``client_id``), the
entry (``entry_id``: the one a get or an update named, the one a save made), the JSON-RPC
request id and the trace id: the audit log's line of the call (``common.audit``). Never an
argument's content: those carry note content, titles and tags.

The fields go on the request's access line (``common.access_log``), so that a call is one
line with its HTTP status; a call without one (no access-log middleware in front, or a
second call in one request) writes its own line (logger ``mcp_endpoint.calls``, INFO).

The trace id is the current span's: the SDK's MCP span, which continues the client's W3C
``traceparent`` (from ``_meta`` or the HTTP headers). The API's no-op tracer keeps the
client's context too, so a line names the client's trace even with tracing off.
"""

import logging
from dataclasses import dataclass

from opentelemetry import trace

from common.access_log import ToolCallLine

logger = logging.getLogger(__name__)

INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1


@dataclass(slots=True)
class ToolCall:
    """What the call's line says. The tool handler makes it; the service's step, which is the
    first to know the grant, fills in ``codex_id``, ``user_id``, ``client_id`` and ``entry_id``
    (both in ``mcp_endpoint.server``). A call refused before then names none of them."""

    tool: str
    request_id: str | int | None = None
    codex_id: int | None = None
    line: ToolCallLine | None = None
    user_id: int | None = None
    client_id: str | None = None
    entry_id: str | None = None

    def log(self, outcome: str, seconds: float) -> None:
        if self.line is None and not logger.isEnabledFor(logging.INFO):
            return
        context = trace.get_current_span().get_span_context()
        trace_id = format(context.trace_id, "032x") if context.is_valid else None
        duration_ms = round(seconds * 1000, 3)
        request_id = self.request_id
        if isinstance(request_id, int) and not INT64_MIN <= request_id <= UINT64_MAX:
            # The client's to choose, and JSON's integers have no bound; the JSON formatter's
            # (orjson) stop at 64 bits, and so do many of the tools that read the lines.
            request_id = str(request_id)
        fields = {
            "tool": self.tool,
            "outcome": outcome,
            "duration_ms": duration_ms,
            "codex_id": self.codex_id,
            "user_id": self.user_id,
            "client_id": self.client_id,
            "entry_id": self.entry_id,
            "request_id": request_id,
            "trace_id": trace_id,
        }
        if self.line is not None and self.line.add(fields):
            return
        logger.info(
            "tool call %s %s in %.1f ms (codex %s, person %s, client %s, entry %s, request %s, trace %s)",
            self.tool,
            outcome,
            duration_ms,
            self.codex_id,
            self.user_id,
            self.client_id,
            self.entry_id,
            request_id,
            trace_id,
            extra=fields,
        )
