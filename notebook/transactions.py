"""Write transactions that queue in-process on SQLite instead of sleeping.

SQLite has one writer at a time. A thread whose ``BEGIN IMMEDIATE`` finds the write lock
taken waits in SQLite's busy handler, which sleeps in growing steps (up to 100 ms) and
polls: under load, writers queue in a lottery of sleeps and p99 grows to seconds. Writers
of one process therefore queue on a ``threading.Lock`` per database file before ``BEGIN``,
and are woken the moment the previous writer commits. The busy timeout still covers other
processes (more uvicorn workers, management commands).

PostgreSQL takes row locks as it goes and needs no such queue: there ``write_transaction``
is exactly ``transaction.atomic``.
"""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections, transaction

_writer_locks: dict[str, threading.Lock] = {}
_writer_locks_guard = threading.Lock()


def _writer_lock(name: str) -> threading.Lock:
    with _writer_locks_guard:
        return _writer_locks.setdefault(name, threading.Lock())


@contextmanager
def write_transaction(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """``transaction.atomic`` for a write, queued behind this process's other writers on
    SQLite. Use it as ``@write_transaction()`` on a service or as a ``with`` block. Inside
    another transaction it is a nested ``atomic`` (a savepoint) and takes no lock: the
    outer transaction already holds the write lock, or is a test's."""
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        with transaction.atomic(using=using):
            yield
        return
    with _writer_lock(str(connection.settings_dict["NAME"])), transaction.atomic(using=using):
        yield
