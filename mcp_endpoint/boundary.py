"""The one sync/async boundary between the async MCP handlers and the sync ORM."""

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

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


class _Workers:
    """The boundary's worker threads: each takes the next job from one queue, runs it in the
    caller's context, and hands its outcome to the caller's event loop. What the loop's default
    executor does for ``run_in_executor``, without its bookkeeping per job (an idle semaphore, a
    concurrent future chained to the loop's); as many threads as that executor would start
    (``min(32, CPUs + 4)``), started with the first job, each keeping its own database
    connection."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.started = False
        self.lock = threading.Lock()

    def submit(self, work: Callable[[], Any]) -> asyncio.Future:
        if not self.started:
            self._start()
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.jobs.put((loop, future, contextvars.copy_context(), work))
        return future

    def _start(self) -> None:
        with self.lock:
            if self.started:
                return
            for number in range(min(32, (os.cpu_count() or 1) + 4)):
                threading.Thread(target=self._serve, name=f"codex-boundary-{number}", daemon=True).start()
            self.started = True

    def _serve(self) -> None:
        while True:
            loop, future, context, work = self.jobs.get()
            try:
                outcome, failed = context.run(work), False
            except BaseException as error:  # handed to the caller, who raises it
                outcome, failed = error, True
            # A caller whose loop has closed since (RuntimeError) waits for nothing.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, outcome, failed)


def _settle(future: asyncio.Future, outcome: Any, failed: bool) -> None:
    if future.done():
        return  # the caller stopped waiting (its deadline, or it was cancelled)
    if failed:
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


_WORKERS = _Workers()


async def run_sync(work: Callable[[], T]) -> T:
    """The one sync/async boundary: ORM work runs in a worker thread (not one shared
    thread), with connections opened and closed around it as Django's own ASGI
    handler does around a request.

    What ``sync_to_async(thread_sensitive=False)`` does, without its machinery for sync
    code that calls back into async code (none here): worker threads (``_Workers``) and the
    caller's context variables. Every tool call pays the hop once. Each worker thread keeps
    its own database connection.

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

    work_done = _WORKERS.submit(call)
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
