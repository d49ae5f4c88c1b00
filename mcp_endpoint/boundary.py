"""The one sync/async boundary between the async MCP handlers and the sync ORM."""

import asyncio
import contextvars
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import OperationalError, close_old_connections

from notebook import transactions

T = TypeVar("T")


def _deadline() -> int | None:
    """The seconds the work may take on PostgreSQL (settings.CODEX_CALL_DEADLINE_SECONDS). None
    on SQLite: its writers wait on its own busy timeout, and its paths stay as they were."""
    if "sqlite" in settings.DATABASES["default"]["ENGINE"]:
        return None
    return settings.CODEX_CALL_DEADLINE_SECONDS


async def run_sync(work: Callable[[], T]) -> T:
    """The one sync/async boundary: ORM work runs in a worker thread (not one shared
    thread), with connections opened and closed around it as Django's own ASGI
    handler does around a request.

    What ``sync_to_async(thread_sensitive=False)`` does, without its machinery for sync
    code that calls back into async code (none here): the loop's executor and the
    caller's context variables. It halves the cost of the hop, which every tool call
    pays once. Each worker thread keeps its own database connection, as before.

    The hop stays a thread on PostgreSQL too: psycopg's async connection on the event loop,
    which would save the hop, costs the event loop more per statement than the hop does
    (``scripts/bench_boundary.py``, docs/performance.md).

    A write's sync (SQLite's group sync, ``notebook.transactions``) is awaited here, after
    the worker thread has returned, so that no thread blocks on the disk: the work's
    result is returned only once its writes are on disk.
    """
    pending = transactions.PendingSyncs()

    def call() -> T:
        close_old_connections()
        try:
            with transactions.syncs_awaited_by(pending):
                return work()
        finally:
            close_old_connections()

    context = contextvars.copy_context()
    work_done = asyncio.get_running_loop().run_in_executor(None, context.run, call)
    deadline = _deadline()
    if deadline is None:
        result = await work_done
    else:
        try:
            result = await asyncio.wait_for(work_done, deadline)
        except TimeoutError:
            # Each wait has its own bound (libpq's tcp_user_timeout, connect_timeout), but a
            # call can chain several, one after the other. The thread finishes on its own
            # (those bounds); what it did is not acknowledged: `unavailable`, safe to retry.
            raise OperationalError(f"the database did not answer within {deadline} s") from None
    # The work's writes are committed; it answers once they are on disk (on SQLite, the
    # group sync), and its thread is free meanwhile.
    await pending.wait()
    return result
