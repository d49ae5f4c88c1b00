"""The group sync: a thread per database file syncs the write-ahead log after commits, once
for every commit made before it began (``notebook.transactions`` explains why)."""

import asyncio
import concurrent.futures
import logging
import os
import threading
import time
from collections.abc import Callable

from django.db import OperationalError

import codex_metrics

logger = logging.getLogger(__name__)

# How long a sync waits for writers already under way to commit, and for at most how many
# commits: a save's transaction takes well under a millisecond, so the writers queued at
# that moment commit within the wait and share the sync.
GATHER_SECONDS = 0.002
GATHER_COMMITS = 16
# Under load, writes arrive in a stream: the calls behind the next commits are still
# checking their token or waiting for the interpreter when a sync begins, so that no writer
# is "under way" yet and the sync would cover a commit or two. Each sync costs the sync, a
# wake-up of this thread and one of each event loop, far more than a commit: so once a sync
# has covered more than one commit (a sign of that stream), the next one waits the same
# GATHER_SECONDS for commits even with no writer under way (``lingers``). A lone writer's
# syncs cover one commit each and never wait.


class LogSync:
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
        self.lingers = False  # the sync being gathered waits for commits with no writer under way
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
        if (not self.running and not self.lingers) or self.committed - self.settled >= GATHER_COMMITS:
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
                raise sync_failed()
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
                while (self.running or self.lingers) and self.committed - self.settled < GATHER_COMMITS:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or not self.gathered.wait(remaining):
                        break
                covered = self.committed  # every commit so far wrote its pages before its ticket
                # The next sync lingers if this one is shared (see GATHER_COMMITS above).
                self.lingers = covered - self.settled > 1
            started = codex_metrics.clock()
            synced = self._sync()
            codex_metrics.sqlite_log_synced(started)
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


def sync_failed() -> OperationalError:
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
        settle(None if synced else sync_failed())
