"""What the service counts, for Prometheus: the metric definitions and the one-line hooks
the apps call (``codex_metrics.tool_call(...)``). Served at ``/metrics`` by
``codex_metrics.exposition`` through ``codex_site.views.metrics``.

This package sits below every app: it imports ``prometheus_client`` and nothing of the
project, so ``notebook``, ``authserver`` and ``mcp_endpoint`` may all call into it.

No label ever carries what a person or a client chose: tools are labelled only with the
names ``define_tool_calls`` was given (anything else is ``unknown``), outcomes only with the
contract's error codes, and every other label is a fixed word written in the code that
calls the hook. Note content, titles, tags, tokens and cookies never reach a metric.

With several uvicorn workers in one process tree (``python -m codex_site.serve --workers
N``), ``PROMETHEUS_MULTIPROC_DIR`` is set before anything imports ``prometheus_client``:
each worker then writes its values to files there, and a scrape of any worker adds up every
worker's (prometheus_client's multiprocess mode).

``CODEX_METRICS=0`` (``configure(enabled=False)``) turns every hook into a return and
``/metrics`` into a 404.
"""

import time
from collections.abc import Iterable

from prometheus_client import Counter, Histogram, disable_created_metrics

# No "_created" series (when each counter was made): they double a scrape's size and say
# nothing a restart's reset of the counters does not.
disable_created_metrics()

UNKNOWN_TOOL = "unknown"
PROTOCOL_ERROR = "protocol_error"  # refused before the tool ran (JSON-RPC -32602)

# Tool calls run from about a millisecond (get) to seconds under load.
_CALL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# The SQLite writer queue and log sync: tens of microseconds when idle.
_SQLITE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

TOOL_CALLS = Counter(
    "codex_tool_calls", "MCP tool calls, by tool and outcome (ok or the error code)", ["tool", "outcome"]
)
TOOL_CALL_SECONDS = Histogram(
    "codex_tool_call_duration_seconds",
    "Time from a tool call's arguments being accepted to its result (token check, service, sync)",
    ["tool"],
    buckets=_CALL_BUCKETS,
)
MCP_RESPONSES = Counter("codex_mcp_http_responses", "HTTP answers on /mcp, by status", ["status"])
TOKEN_REFUSALS = Counter("codex_token_refusals", "Bearer tokens refused on /mcp, by reason", ["reason"])
LIMIT_REFUSALS = Counter("codex_limit_refusals", "Requests refused by a quota or rate limit, by kind", ["kind"])
DATABASE_UNAVAILABLE = Counter(
    "codex_database_unavailable", "Requests answered 'unavailable' (503 or the tool error) because the database failed"
)
SQLITE_WRITER_WAIT = Histogram(
    "codex_sqlite_writer_wait_seconds",
    "SQLite: time a write waited in this process's writer queue before its transaction",
    buckets=_SQLITE_BUCKETS,
)
SQLITE_LOG_SYNC = Histogram(
    "codex_sqlite_log_sync_seconds",
    "SQLite: duration of each group sync of the write-ahead log",
    buckets=_SQLITE_BUCKETS,
)

# The fixed words of the other labels, so that every series exists (at 0) from the start.
TOKEN_REFUSAL_REASONS = ("missing", "invalid", "expired", "wrong_audience", "user_inactive", "insufficient_scope")
LIMIT_KINDS = (
    "tool_calls_per_minute",
    "entries",
    "stored_bytes",
    "registrations",
    "registrations_waiting",
    "metadata_documents",
    "sign_in_failures",
    "account_actions",
    "client_authentication_failures",
)

_enabled = True
# (tool, outcome) -> its counter, and tool -> its histogram, made once (``labels()`` per
# call costs a lock and a tuple): also bounds the label values to the known ones.
_calls: dict[tuple[str, str], Counter] = {}
_durations: dict[str, Histogram] = {}
_outcomes: frozenset[str] = frozenset()
_token_refusals = {reason: TOKEN_REFUSALS.labels(reason) for reason in TOKEN_REFUSAL_REASONS}
_limit_refusals = {kind: LIMIT_REFUSALS.labels(kind) for kind in LIMIT_KINDS}
_statuses: dict[int, Counter] = {}

clock = time.perf_counter
"""What a hook's ``started`` argument is taken from."""


def configure(*, enabled: bool) -> None:
    """``CODEX_METRICS``: with it off, every hook returns at once."""
    global _enabled
    _enabled = enabled


def enabled() -> bool:
    return _enabled


def define_tool_calls(tools: Iterable[str], outcomes: Iterable[str]) -> None:
    """The tool names and outcomes that may label a call; anything else is ``unknown``."""
    global _outcomes
    _outcomes = frozenset([*outcomes, PROTOCOL_ERROR])
    for tool in [*tools, UNKNOWN_TOOL]:
        _durations[tool] = TOOL_CALL_SECONDS.labels(tool)
        for outcome in _outcomes:
            _calls[(tool, outcome)] = TOOL_CALLS.labels(tool, outcome)


def tool_call(tool: str, outcome: str, started: float) -> None:
    """A tool call answered ``outcome`` (``ok`` or the error code), ``started`` at ``clock()``."""
    if not _enabled:
        return
    if tool not in _durations:
        tool = UNKNOWN_TOOL
    _calls[(tool, outcome if outcome in _outcomes else "internal")].inc()
    _durations[tool].observe(clock() - started)


def tool_call_refused(tool: str) -> None:
    """A tools/call refused before its tool ran (unknown tool, arguments refused: -32602)."""
    if _enabled:
        _calls[(tool if tool in _durations else UNKNOWN_TOOL, PROTOCOL_ERROR)].inc()


def counts_protocol_errors(check):
    """Decorates the protocol-level argument check ``check(name, arguments)``: each call it
    refuses (by raising) is a ``protocol_error`` of that tool."""

    def checked(name, arguments):
        try:
            return check(name, arguments)
        except Exception:
            tool_call_refused(name)
            raise

    checked.__doc__, checked.__name__, checked.__wrapped__ = check.__doc__, check.__name__, check
    return checked


def token_refused(reason: str) -> None:
    """A bearer token was refused; ``reason`` is one of ``TOKEN_REFUSAL_REASONS``."""
    if _enabled:
        _token_refusals[reason].inc()


def limit_refused(kind: str) -> None:
    """A quota or rate limit refused a request; ``kind`` is one of ``LIMIT_KINDS``."""
    if _enabled:
        _limit_refusals[kind].inc()


def database_unavailable() -> None:
    if _enabled:
        DATABASE_UNAVAILABLE.inc()


def sqlite_writer_waited(started: float) -> None:
    """A write left the writer queue for its transaction; it had queued at ``started``."""
    if _enabled:
        SQLITE_WRITER_WAIT.observe(clock() - started)


def sqlite_log_synced(started: float) -> None:
    """A group sync of the SQLite log, begun at ``started``, is over."""
    if _enabled:
        SQLITE_LOG_SYNC.observe(clock() - started)


def mcp_status(status: int) -> None:
    if _enabled:
        counter = _statuses.get(status)
        if counter is None:
            counter = _statuses[status] = MCP_RESPONSES.labels(str(status))
        counter.inc()


class ResponseCounter:
    """Counts the status of every HTTP answer on ``paths`` (``codex_mcp_http_responses``),
    through the access log's wrapper of ``send`` (``common.access_log.access_logged``): a
    wrapper of its own would be an await more per message of every request."""

    def __init__(self, paths: Iterable[str]) -> None:
        self.paths = frozenset(paths)

    def watches(self, scope) -> bool:
        return _enabled and scope.get("path") in self.paths

    def count(self, status: int) -> None:
        mcp_status(status)
