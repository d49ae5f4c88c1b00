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
back from the operating system (about 45 ``pread`` calls per save). One connection that makes
every commit of the process keeps its cache. Django's connections are per thread: for the
length of the transaction the thread's handle is swapped for the writer connection (which
allows thread sharing), so ``connection`` and the ORM inside the block use it, and the
thread's own connection is put back after. Reads outside write transactions keep using each
thread's connection, and a thread whose connection is watched (``DEBUG``'s query log,
``assertNumQueries``, execute wrappers) writes on it, so that the watchers see every statement.

A commit in WAL mode appends the pages it changed to the ``-wal`` file. SQLite's
``synchronous=FULL`` would sync that file inside every ``COMMIT``, while the writer holds
the write lock (on this machine about 0.3 ms of waiting and 0.9 ms of kernel CPU per
commit, all of it inside the queue). Instead the connections run ``synchronous=NORMAL``
(``codex_site.settings``) and the log is synced after the commit, outside the lock, by a
thread per database file: a *group sync*. Each commit takes a ticket; one sync at a time
runs, and it covers every commit whose ticket was taken before it began. Before it starts,
the sync waits briefly (``GATHER_SECONDS``, at most ``GATHER_COMMITS`` commits) for the
writers already queued or running to commit, so that they share it: on a virtual disk each
sync costs far more CPU than the wait. ``write_transaction`` returns once its commit is
synced. Inside ``syncs_awaited_by`` (the tools' boundary) it returns right after the
commit and leaves the ticket to the caller, which awaits the sync in its event loop before
it answers: the worker thread is free for the next call instead of blocked, and the sync
thread wakes each event loop once for all the calls it covered. A write is acknowledged
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
is exactly ``transaction.atomic``.
"""

import asyncio
import concurrent.futures
import contextvars
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, OperationalError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)

# How long the checkpointer waits after a commit before it checkpoints: the commits of
# that moment share one checkpoint (two fsyncs), and a page they all change (the codex
# row, the ends of the indexes) is copied once.
CHECKPOINT_PAUSE = 0.1
# SQLite starts the log over (instead of growing it) only at a commit that finds every
# page in it copied and no reader using it: writers that keep committing while a
# checkpoint runs, and readers still reading the log, prevent that under sustained load.
# Past this many pages (32 MiB at 4 KiB) after a checkpoint, the checkpointer copies the
# rest with this process's writers held, in RESTART mode (which also waits for the log's
# readers to finish), so that the next commit starts the log over. That copy is short:
# only what was committed during the checkpoint before it.
CATCH_UP_PAGES = 8_000
# RESTART waits for every reader of the log to finish, with this process's writers held. A
# long reader (an online backup's copy, a large export) would hold them all for as long as it
# reads: the catch-up waits this long at most, gives up (busy), and is not tried again for
# CATCH_UP_BACKOFF seconds; the log grows meanwhile and is caught up once the reader is gone.
CATCH_UP_WAIT_MS = 50
CATCH_UP_BACKOFF = 1.0
# How long a sync waits for writers already under way to commit, and for at most how many
# commits: a save's transaction takes well under a millisecond, so the writers queued at
# that moment commit within the wait and share the sync.
GATHER_SECONDS = 0.002
GATHER_COMMITS = 16


class _Checkpointer:
    """One daemon thread per SQLite database file that checkpoints after commits."""

    def __init__(self, alias: str, lock: threading.Lock) -> None:
        self.alias = alias
        self.lock = lock
        self.wanted = threading.Event()
        self.catch_up_after = 0.0  # no catch-up before this moment (time.monotonic) after a busy one
        self.thread = threading.Thread(target=self._run, name=f"sqlite-checkpoint-{alias}", daemon=True)
        self.thread.start()

    def nudge(self) -> None:
        self.wanted.set()

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int]:
        """``PRAGMA wal_checkpoint(mode)``: (busy, pages in the log, pages copied)."""
        # This thread's own connection, with the same settings (and so the same
        # synchronous level, which decides the checkpoint's fsyncs) as the requests'.
        connection = connections[self.alias]
        with connection.cursor() as cursor:
            if mode == "PASSIVE":  # never waits for anyone
                cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
                return tuple(cursor.fetchone())
            cursor.execute(f"PRAGMA busy_timeout = {CATCH_UP_WAIT_MS}")
            try:
                cursor.execute(f"PRAGMA wal_checkpoint({mode})")
                return tuple(cursor.fetchone())
            finally:
                normal_ms = int(float(connection.settings_dict["OPTIONS"].get("timeout", 5)) * 1000)
                cursor.execute(f"PRAGMA busy_timeout = {normal_ms}")

    def _run(self) -> None:
        while True:
            self.wanted.wait()
            time.sleep(CHECKPOINT_PAUSE)
            self.wanted.clear()
            try:
                _, pages, _ = self.checkpoint()
                if pages >= CATCH_UP_PAGES and time.monotonic() >= self.catch_up_after:
                    with self.lock:
                        busy, _, _ = self.checkpoint("RESTART")
                    if busy:
                        self.catch_up_after = time.monotonic() + CATCH_UP_BACKOFF
            except Exception:
                # The next commit nudges again; the automatic checkpoint is the backstop.
                logger.warning("SQLite checkpoint failed", exc_info=True)
                connections[self.alias].close()


class _LogSync:
    """The group sync of one database file's write-ahead log (see the module docstring):
    a thread that syncs the log after commits, for every commit made before it began."""

    def __init__(self, database: str) -> None:
        self.log = database + "-wal"
        self.lock = threading.Lock()  # guards everything below
        self.committing = threading.Condition(self.lock)  # notified when a commit is made (or closing)
        self.gathered = threading.Condition(self.lock)  # notified when the sync need wait no longer
        self.running = 0  # writers queued or in their transaction: commits on the way
        self.committed = 0  # tickets taken: commits whose pages are written to the log
        self.settled = 0  # every ticket up to this one has had its sync, done or failed
        self.synced = 0  # every ticket up to this one is on disk
        # Who waits for which ticket: (ticket, event loop or None for a blocked thread, callback).
        self.waiting: list[tuple[int, asyncio.AbstractEventLoop | None, Callable[[Exception | None], None]]] = []
        self.closed = False
        self.thread = threading.Thread(target=self._run, name=f"sqlite-sync-{database}", daemon=True)
        self.thread.start()

    def begin(self) -> None:
        """A writer is on its way to a commit (``end`` or ``commit`` follows)."""
        with self.lock:
            self.running += 1

    def end(self) -> None:
        """A writer that ``begin`` announced will not commit (its transaction failed)."""
        with self.lock:
            self.running -= 1
            self._notify_if_gathered()

    def commit(self, *, began: bool = False) -> int:
        """The ticket for every page written to the log so far: for a commit just made
        (``began``: announced by ``begin``), or for commits other threads made, which may
        not have taken their tickets yet (``wait_durable``). Its sync starts at once."""
        with self.lock:
            self.committed += 1
            if began:
                self.running -= 1
            self.committing.notify()
            self._notify_if_gathered()
            return self.committed

    def _notify_if_gathered(self) -> None:
        # Only then: each wake-up of the sync's thread costs a context switch, and most
        # commits come while it waits for more.
        if not self.running or self.committed - self.settled >= GATHER_COMMITS:
            self.gathered.notify()

    def wait(self, ticket: int) -> None:
        """Block until ``ticket``'s commit is on disk; raise if its sync failed."""
        outcome: concurrent.futures.Future[None] = concurrent.futures.Future()
        if self._waits(ticket, None, lambda error: _settle(outcome, error)):
            outcome.result()

    async def wait_async(self, ticket: int) -> None:
        """``wait`` for a coroutine, whose event loop goes on meanwhile."""
        loop = asyncio.get_running_loop()
        outcome = loop.create_future()
        if self._waits(ticket, loop, lambda error: _settle(outcome, error)):
            await outcome

    def _waits(
        self, ticket: int, loop: asyncio.AbstractEventLoop | None, settle: Callable[[Exception | None], None]
    ) -> bool:
        """Register ``settle`` for ``ticket``'s sync (it runs in ``loop``, or in the sync's
        thread); False if that sync is already done. Raise if it failed."""
        with self.lock:
            if self.synced >= ticket:
                return False
            if self.settled >= ticket:
                raise _sync_failed()
            self.waiting.append((ticket, loop, settle))
        return True

    def close(self) -> None:
        """Stop the sync's thread once every commit has had its sync (for tests, which
        make syncs of their own)."""
        with self.lock:
            self.closed = True
            self.committing.notify()
        self.thread.join()

    def _run(self) -> None:
        while True:
            with self.lock:
                while self.committed == self.settled:
                    if self.closed:
                        return
                    self.committing.wait()
                # Writers on their way commit within moments: wait for them to share this sync.
                deadline = time.monotonic() + GATHER_SECONDS
                while self.running and self.committed - self.settled < GATHER_COMMITS:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self.gathered.wait(remaining):
                        break
                covered = self.committed  # every commit so far wrote its pages before its ticket
            synced = self._sync()
            with self.lock:
                self.settled = covered
                if synced:
                    self.synced = covered
                due = [waiter for waiter in self.waiting if waiter[0] <= covered]
                self.waiting = [waiter for waiter in self.waiting if waiter[0] > covered]
            # One wake-up per event loop for all its calls that waited for this sync.
            by_loop: dict[asyncio.AbstractEventLoop | None, list[Callable[[Exception | None], None]]] = {}
            for _, loop, settle in due:
                by_loop.setdefault(loop, []).append(settle)
            for loop, settles in by_loop.items():
                if loop is None:
                    _settle_all(settles, synced)
                else:
                    loop.call_soon_threadsafe(_settle_all, settles, synced)

    def _sync(self) -> bool:
        """Sync the log; whether it is on disk (a failure is logged)."""
        try:
            descriptor = os.open(self.log, os.O_RDONLY)
            try:
                os.fsync(descriptor)
            finally:
                os.close(descriptor)
        except FileNotFoundError:
            # No log: the last connection checkpointed it into the database file,
            # synced, and removed it; what it held is on disk.
            return True
        except OSError as error:
            logger.error("Syncing the SQLite log %s failed: %s", self.log, error)
            return False
        return True


def _sync_failed() -> OperationalError:
    """What a write whose commit could not be synced raises: it is not acknowledged, and
    the tools answer ``unavailable`` (retry), as for any database outage."""
    return OperationalError("the SQLite log could not be synced to disk")


def _settle(outcome: "asyncio.Future[None] | concurrent.futures.Future[None]", error: Exception | None) -> None:
    if not outcome.done():  # a call that was cancelled no longer waits
        if error is None:
            outcome.set_result(None)
        else:
            outcome.set_exception(error)


def _settle_all(settles: list[Callable[[Exception | None], None]], synced: bool) -> None:
    for settle in settles:
        # A fresh exception for each: each is raised, and gets a traceback, in its own call.
        settle(None if synced else _sync_failed())


class _DatabaseFile:
    """What this process's writers of one SQLite database file share: the queue, the writer
    connection, the group sync and the checkpointer."""

    def __init__(self, name: str, connection: BaseDatabaseWrapper) -> None:
        self.lock = threading.Lock()
        self.sync = _LogSync(name)
        # Same backend and settings as the threads' connections; opened on first use.
        self.writer = type(connection)(connection.settings_dict, connection.alias)
        self.writer.inc_thread_sharing()
        self.checkpointer = _Checkpointer(connection.alias, self.lock)


_files: dict[str, _DatabaseFile] = {}
_files_guard = threading.Lock()


def _file(connection: BaseDatabaseWrapper) -> _DatabaseFile:
    name = str(connection.settings_dict["NAME"])
    found = _files.get(name)
    if found is None:
        with _files_guard:
            found = _files.get(name)
            if found is None:
                found = _files[name] = _DatabaseFile(name, connection)
    return found


def writer_lock(using: str = DEFAULT_DB_ALIAS) -> threading.Lock:
    """The queue of this process's writers of the SQLite database ``using`` names."""
    return _file(connections[using]).lock


class PendingSyncs:
    """The commits a call made without waiting for their sync, inside ``syncs_awaited_by``:
    awaited (``wait``) before the call answers."""

    def __init__(self) -> None:
        self.tickets: dict[_LogSync, int] = {}

    def add(self, sync: _LogSync, ticket: int) -> None:
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


def _durable(sync: _LogSync, ticket: int) -> None:
    """Wait for ``ticket``'s sync here, or leave it to the caller that awaits it."""
    pending = _pending.get()
    if pending is None:
        sync.wait(ticket)
    else:
        pending.add(sync, ticket)


@contextmanager
def write_transaction(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """``transaction.atomic`` for a write, queued behind this process's other writers on
    SQLite, run on the writer connection, and returning once the commit is on disk (the
    group sync), or, inside ``syncs_awaited_by``, with its sync left to the caller.
    Use it as ``@write_transaction()`` on a service or as a ``with`` block.
    Inside another transaction it is a nested ``atomic`` (a savepoint) on that
    transaction's connection and takes no lock: the outer transaction already holds the
    write lock, or is a test's."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        with transaction.atomic(using=using):
            yield
        return
    file = _file(connection)
    file.sync.begin()
    try:
        with file.lock:
            # A thread whose connection is watched (DEBUG's query log, assertNumQueries,
            # execute wrappers) writes on it, so that the watchers see the statements; a
            # wrapper that every connection has (tracing's) sees them on the writer too.
            watched = connection.queries_logged or any(
                not getattr(wrapper, "on_every_connection", False) for wrapper in connection.execute_wrappers
            )
            if not watched:
                # What Django does for a thread's connection at each request's start: close
                # it if an error left it unusable or it outlived CONN_MAX_AGE (reopened on use).
                file.writer.close_if_unusable_or_obsolete()
                connections[using] = file.writer
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
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        sync = _file(connection).sync
        _durable(sync, sync.commit())
