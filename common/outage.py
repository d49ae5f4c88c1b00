"""Quiet, useful logging while the database is unreachable.

During an outage every request fails the same way. A full traceback for each one
buries the logs (a five-second PostgreSQL stop once wrote 70,000 lines), so each
refused request logs one line, and a traceback is logged only for the first
failure of an outage: the first one in this process, or the first after
``QUIET_SECONDS`` without a database failure.
"""

import logging
import threading
import time

from django.db import DatabaseError, InterfaceError, OperationalError

import codex_metrics

QUIET_SECONDS = 30.0
"""A database failure after this long without one starts a new outage (and gets a traceback)."""

# The faults that mean "the database is unreachable or overloaded right now; retry".
UNAVAILABLE_ERRORS: tuple[type[DatabaseError], ...] = (OperationalError, InterfaceError)

_lock = threading.Lock()
_last_failure: float | None = None


def _starts_outage() -> bool:
    global _last_failure
    now = time.monotonic()
    with _lock:
        starts = _last_failure is None or now - _last_failure > QUIET_SECONDS
        _last_failure = now
    return starts


def log_database_unavailable(logger: logging.Logger, what: str, error: BaseException) -> None:
    """One WARNING line naming ``what`` was refused and why; the traceback once per outage."""
    codex_metrics.database_unavailable()
    first_line = (str(error).strip().splitlines() or [""])[0][:200]
    if _starts_outage():
        logger.warning(
            "database unavailable: %s refused (%s: %s); traceback logged once per outage",
            what,
            type(error).__name__,
            first_line,
            exc_info=error,
        )
    else:
        logger.warning("database unavailable: %s refused (%s: %s)", what, type(error).__name__, first_line)


def reset() -> None:
    """Forget the current outage (tests)."""
    global _last_failure
    with _lock:
        _last_failure = None
