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


class Checkpointer:
    """One daemon thread per SQLite database file that checkpoints after commits."""

    def __init__(self, alias: str, lock: threading.Lock) -> None:
        self.alias = alias
        self.lock = lock
        self.wanted = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"sqlite-checkpoint-{alias}", daemon=True)
        self.thread.start()

    def nudge(self) -> None:
        self.wanted.set()

    def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int]:
        """``PRAGMA wal_checkpoint(mode)``: (busy, pages in the log, pages copied)."""
        # This thread's own connection, with the same settings (and so the same
        # synchronous level, which decides the checkpoint's fsyncs) as the requests'.
        with connections[self.alias].cursor() as cursor:
            cursor.execute(f"PRAGMA wal_checkpoint({mode})")
            return tuple(cursor.fetchone())

    def _run(self) -> None:
        while True:
            self.wanted.wait()
            time.sleep(CHECKPOINT_PAUSE)
            self.wanted.clear()
            try:
                _, pages, _ = self.checkpoint()
                if pages >= CATCH_UP_PAGES:
                    with self.lock:
                        self.checkpoint("RESTART")
            except Exception:
                # The next commit nudges again; the automatic checkpoint is the backstop.
                logger.warning("SQLite checkpoint failed", exc_info=True)
                connections[self.alias].close()
