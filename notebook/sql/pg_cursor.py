"""The psycopg cursor that the fast path's statements run on, on PostgreSQL (``notebook.sql.driver``).

A ``psycopg.Cursor`` binds parameters on the server, so that a statement run often enough is
prepared (Django's own cursors bind on the client, which never prepares). Its timestamps are
loaded as Django's loader loads them (``psycopg_any.BaseTzLoader``: psycopg's value with the
connection's time zone put in place), over psycopg's own loader: Django's subclasses psycopg's
loader written in Python, where psycopg_binary has the same one in C. Where the session's time
zone is UTC and so is the connection's (Django's default, ``TIME_ZONE`` unset), psycopg's loader
already gives Django's value, ``datetime.UTC`` in place, and is used as it is: a search page
loads two timestamps for each of its entries.
"""

import datetime as dt
import functools
from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.postgresql.base import TIMESTAMPTZ_OID
from psycopg.adapt import Loader
from psycopg.pq import Format

# psycopg's own loader of timestamptz text (its C version where psycopg_binary is installed).
_TIMESTAMPTZ = psycopg.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT)


class _TzLoader(Loader):
    timezone: dt.tzinfo | None = None

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._load = _TIMESTAMPTZ(oid, context).load

    def load(self, data: Any) -> dt.datetime:
        return self._load(data).replace(tzinfo=self.timezone)


@functools.cache
def tz_loader(timezone: dt.tzinfo) -> type[_TzLoader]:
    """The loader for ``timezone``, made once (as Django's ``register_tzloader`` makes its own)."""
    return type("TzLoader", (_TzLoader,), {"timezone": timezone})


def _loader(raw: psycopg.Connection, timezone: dt.tzinfo) -> type[Loader]:
    """The loader of timestamps for a cursor of ``raw`` that loads them in ``timezone``: psycopg's
    own where it gives Django's values already (both zones UTC: it then returns its timestamps in
    ``datetime.UTC``, which Django's loader would only put in place again), else ``tz_loader``.
    Django sets the session's zone once, when it connects (``ensure_timezone``), and the cursor is
    made again for a new connection or zone (``cursor``)."""
    if timezone is dt.UTC and raw.pgconn.parameter_status(b"TimeZone") == b"UTC":
        return _TIMESTAMPTZ
    return tz_loader(timezone)


# Where a Django connection keeps its psycopg cursor: (the psycopg connection, the time zone
# its loader loads in, the cursor). An attribute of our own on Django's wrapper, which is the
# thread's (Django's connections are per thread), so the cursor is never shared by threads.
_KEPT = "_codex_psycopg_cursor"


def cursor(connection: BaseDatabaseWrapper) -> psycopg.Cursor | None:
    """A cursor of the connection, or None (Django's cursor then) where the connection's time
    zone loader is not the one Django's cursor would use (Django then registers another on its
    cursor: a database ``TIME_ZONE`` changed after connecting).

    One cursor per psycopg connection and time zone, kept open on the Django connection and
    used for every statement: making a cursor and registering its loader cost more than a
    prepared key lookup's own work in psycopg. Reusing it is safe because psycopg's client
    cursor reads a statement's whole result at ``execute`` (no portal or read transaction
    stays open after it), and ``execute`` replaces the last result; a new psycopg connection
    (a reconnect, the pool's next one) or time zone gets a new cursor.
    """
    raw = connection.connection
    timezone = connection.timezone
    if raw.adapters.get_loader(TIMESTAMPTZ_OID, Format.TEXT).timezone != timezone:
        return None
    kept = getattr(connection, _KEPT, None)
    if kept is not None and kept[0] is raw and kept[1] is timezone and not kept[2].closed:
        return kept[2]
    opened = psycopg.Cursor(raw)
    opened.adapters.register_loader(TIMESTAMPTZ_OID, _loader(raw, timezone))
    setattr(connection, _KEPT, (raw, timezone, opened))
    return opened
