"""Write transactions that queue in-process on SQLite instead of sleeping, on one connection
whose cache stays warm, synced in groups, and WAL checkpoints off the request path.

SQLite has one writer at a time. A thread whose ``BEGIN IMMEDIATE`` finds the write lock
taken waits in SQLite's busy handler, which sleeps in growing steps (up to 100 ms) and
polls: under load, writers queue in a lottery of sleeps and p99 grows to seconds. Writers
of one process therefore queue on a ``threading.Lock`` per database file before ``BEGIN``,
and are woken the moment the previous writer commits. The busy timeout still covers other
processes (more uvicorn workers, management commands).

The writer at the head of the queue runs its transaction on the process's *writer
connection* for that file, not on its thread's own. In WAL mode a connection drops its whole
page cache whenever another connection has committed since its last transaction, so with a
connection per thread every write started cold and read each page of the indexes it touched
back from the operating system. One connection that makes
every commit of the process keeps its cache. Django's connections are per thread: for the
length of the transaction the thread's handle is swapped for the write connection (which
allows thread sharing), so ``connection`` and the ORM inside the block use it, and the
thread's own connection is put back after. Reads outside write transactions keep using each
thread's connection, and a thread whose connection is watched (``DEBUG``'s query log,
``assertNumQueries``, execute wrappers) writes on it, so that the watchers see every statement.

A commit in WAL mode appends the pages it changed to the ``-wal`` file. SQLite's
``synchronous=FULL`` would sync that file inside every ``COMMIT``, while the writer holds
the write lock (its waiting and kernel CPU all inside the queue). Instead the connections run ``synchronous=NORMAL``
(``codex_site.settings``) and the log is synced after the commit, outside the lock, by a
thread per database file: a *group sync*. Each commit takes a ticket; one sync at a time
runs, and it covers every commit whose ticket was taken before it began. Before it starts,
the sync waits briefly (``GATHER_SECONDS``, at most ``GATHER_COMMITS`` commits) for the
writers already queued or running to commit, so that they share it, and, once a sync has
been shared (writes arriving in a stream), for the next commits even before their writers
are queued: on a virtual disk each sync costs far more CPU than the wait.
``write_transaction`` returns once its commit is synced. Inside ``syncs_awaited_by`` (the
tools' boundary) it returns right after the commit and leaves the ticket to the caller,
which awaits the sync in its event loop before it answers: the worker thread is free for
the next call instead of blocked, and the sync thread wakes each event loop once for all the
calls it covered. A write is acknowledged
only once its log pages are on disk, as with ``FULL``, and so survives a power loss; a
write whose sync fails is not acknowledged (``OperationalError``: the tools answer
``unavailable``, and a retried save finds its entry). (Writes that do not go through
``write_transaction``, such as sign-in sessions and OAuth grants, are synced by the next
notebook write or checkpoint.)

A *checkpoint* copies the log back into the database file and syncs both. SQLite's
automatic checkpoint runs inside the ``COMMIT`` that takes the log past
``wal_autocheckpoint`` pages, that is inside a request and, here, inside the queue: every
writer of the process waited for its copy and its two ``fsync`` calls (most of a save's
wall time, and its p99). So each commit of ``write_transaction`` only nudges a
checkpointer thread per database file, which checkpoints (``PASSIVE``: it never blocks a
writer) a moment later, once for the commits of that moment. The automatic checkpoint stays
as a backstop at a higher threshold (``wal_autocheckpoint`` in ``codex_site.settings``).

PostgreSQL takes row locks as it goes and needs no such queue: there ``write_transaction``
is exactly ``transaction.atomic``. So it is on SQLite without the fast path
(``CODEX_FAST_PATH=0``), where SQLite syncs each commit itself (synchronous=FULL) and
waiting writers sleep in its busy handler.

The machinery lives in ``notebook.sqlite``: ``files`` (queue and write connection),
``group_sync`` and ``checkpointer``; this module is what the services use.
"""

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction

import codex_metrics
from notebook.sqlite.files import file_of, write_queue
from notebook.sqlite.group_sync import LogSync

__all__ = ["PendingSyncs", "syncs_awaited_by", "wait_durable", "write_queue", "write_transaction"]


class PendingSyncs:
    """The commits a call made without waiting for their sync, inside ``syncs_awaited_by``:
    awaited (``wait``) before the call answers."""

    def __init__(self) -> None:
        self.tickets: dict[LogSync, int] = {}

    def add(self, sync: LogSync, ticket: int) -> None:
        self.tickets[sync] = max(ticket, self.tickets.get(sync, 0))

    async def wait(self) -> None:
        """Return once every commit recorded is on disk; raise ``OperationalError`` if a
        sync failed."""
        for sync, ticket in self.tickets.items():
            await sync.wait_async(ticket)


_pending: contextvars.ContextVar[PendingSyncs | None] = contextvars.ContextVar("pending_syncs", default=None)


@contextmanager
def syncs_awaited_by(pending: PendingSyncs) -> Iterator[None]:
    """Inside this block a write returns right after its commit and records its sync in
    ``pending``, which the caller awaits before it acknowledges anything: a worker thread
    does not block for a sync (the tools' boundary, ``mcp_endpoint.boundary``)."""
    reset = _pending.set(pending)
    try:
        yield
    finally:
        _pending.reset(reset)


def _durable(sync: LogSync, ticket: int) -> None:
    """Wait for ``ticket``'s sync here, or leave it to the caller that awaits it."""
    pending = _pending.get()
    if pending is None:
        sync.wait(ticket)
    else:
        pending.add(sync, ticket)


@contextmanager
def write_transaction(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """``transaction.atomic`` for a write, queued behind this process's other writers on
    SQLite, run on the write connection, and returning once the commit is on disk (the
    group sync), or, inside ``syncs_awaited_by``, with its sync left to the caller.
    Use it as ``@write_transaction()`` on a service or as a ``with`` block.
    Inside another transaction it is a nested ``atomic`` (a savepoint) on that
    transaction's connection and takes no lock: the outer transaction already holds the
    write lock, or is a test's."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block or not settings.CODEX_FAST_PATH:
        with transaction.atomic(using=using):
            yield
        return
    file = file_of(connection)
    file.sync.begin()
    try:
        queued = codex_metrics.clock()
        with file.lock:
            codex_metrics.sqlite_writer_waited(queued)
            # A thread whose connection is watched (DEBUG's query log, assertNumQueries,
            # execute wrappers) writes on it, so that the watchers see the statements; a
            # wrapper that every connection has (tracing's) sees them on the writer too.
            watched = connection.queries_logged or any(
                not getattr(wrapper, "on_every_connection", False) for wrapper in connection.execute_wrappers
            )
            if not watched:
                # What Django does for a thread's connection at each request's start: close
                # it if an error left it unusable or it outlived CONN_MAX_AGE (reopened on use).
                file.connection.close_if_unusable_or_obsolete()
                connections[using] = file.connection
            try:
                with transaction.atomic(using=using):
                    yield
            finally:
                connections[using] = connection
    except BaseException:
        file.sync.end()
        raise
    _durable(file.sync, file.sync.commit(began=True))
    file.checkpointer.nudge()


def wait_durable(using: str = DEFAULT_DB_ALIAS) -> None:
    """Return once every commit made so far is on disk (or, inside ``syncs_awaited_by``,
    leave that to the caller): for answering with a write this thread did not make (a
    replayed save returns the entry another call saved, which may still be waiting for its
    sync). Inside a transaction, and on PostgreSQL, there is nothing to wait for: the outer
    commit, or PostgreSQL's own, makes it durable."""
    connection = connections[using]
    if connection.vendor == "sqlite" and not connection.in_atomic_block and settings.CODEX_FAST_PATH:
        sync = file_of(connection).sync
        _durable(sync, sync.commit())
