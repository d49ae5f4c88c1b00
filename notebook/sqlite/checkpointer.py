"""The checkpointer: WAL checkpoints off the request path, a moment after commits."""

import logging
import threading
import time

from django.db import connections

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


class Checkpointer:
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
