"""PostgreSQL's protocol as the client sent and received it, from libpq's own trace: what a
test or a benchmark counts round trips and statements in (tests/test_round_trips.py,
tests/test_shard_readiness.py, scripts/bench_capacity.py)."""

import tempfile
from collections.abc import Callable
from typing import Any

from django.db import connection as default_connection

# A statement's preparation (settings.PG_PREPARE_THRESHOLD): Parse answered on its own, once
# per connection and statement, on the run that reaches the threshold.
PREPARATION = ["ParseComplete", "ReadyForQuery"]


def traced(work: Callable[[], Any], connection: Any = None) -> list[tuple[str, str, str]]:
    """``work()`` on this thread's connection (or ``connection``), and the (direction, message
    type, content) of each protocol message it caused: direction ``F`` from the client, ``B``
    from the server."""
    from psycopg import pq

    connection = connection or default_connection
    connection.ensure_connection()
    pgconn = connection.connection.pgconn
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as trace:
        pgconn.trace(trace.fileno())
        pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            work()
        finally:
            pgconn.untrace()
        trace.seek(0)
        fields = [line.split("\t") for line in trace.read().splitlines()]
    return [(line[0], line[2], "\t".join(line[3:])) for line in fields if len(line) > 2 and line[0] in ("F", "B")]


def exchanges(work: Callable[[], Any]) -> list[list[str]]:
    """The server's answers to ``work()``: the message types of each, up to its ReadyForQuery."""
    answers: list[list[str]] = [[]]
    for direction, kind, _ in traced(work):
        if direction == "B":
            answers[-1].append(kind)
            if kind == "ReadyForQuery":
                answers.append([])
    return answers[:-1]


def round_trips(work: Callable[[], Any]) -> int:
    """Round trips, not counting a statement's one preparation on this connection."""
    return sum(1 for answer in exchanges(work) if answer != PREPARATION)
