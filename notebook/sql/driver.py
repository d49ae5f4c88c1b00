"""The driver call: a statement straight to the database driver, with Django's checks."""

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db.backends.base.base import BaseDatabaseWrapper

from common import tracing

T = TypeVar("T")


@functools.lru_cache(maxsize=512)
def _driver_sql(sql: str) -> str:
    """``sql`` in the SQLite driver's parameter style, converted as Django's SQLite cursor
    converts it on every call (``SQLiteCursorWrapper.convert_query``)."""
    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


def _sqlite_cursor(connection: BaseDatabaseWrapper, sql: str) -> tuple[Any, str, bool] | None:
    # A fresh cursor, closed after its statement: an unfinished SELECT would keep SQLite's
    # read transaction (and its snapshot) open.
    return connection.connection.cursor(), _driver_sql(sql), True


def _postgresql_cursor(connection: BaseDatabaseWrapper, sql: str) -> tuple[Any, str, bool] | None:
    from notebook.sql import pg_cursor

    # The connection's kept cursor, left open (``pg_cursor.cursor`` says why that is safe).
    opened = pg_cursor.cursor(connection)
    return None if opened is None else (opened, sql, False)


# The vendors whose statements may go straight to the driver: the driver's cursor, the
# statement in its parameter style, and whether to close the cursor after the statement.
_DIRECT: dict[str, Callable[[BaseDatabaseWrapper, str], tuple[Any, str, bool] | None]] = {
    "sqlite": _sqlite_cursor,
    "postgresql": _postgresql_cursor,
}


def run(
    connection: BaseDatabaseWrapper,
    sql: str,
    params: Sequence[Any] | None,
    result: Callable[[Any], T],
    *,
    prepare: bool = True,
) -> T:
    """``with connection.cursor() as cursor: cursor.execute(sql, params); return result(cursor)``.

    On SQLite and PostgreSQL, while nothing watches Django's cursor layers (no query log and
    no execute wrapper that would see the statement: ``assertNumQueries``, ``DEBUG``, the debug
    toolbar, and traces in a call that is sampled, see every statement), the statement goes
    straight to the driver with the checks Django's
    cursor makes first (health check, connection, thread sharing, no broken transaction) and
    its error wrapping (``IntegrityError`` stays Django's). Django's cursor layers (and on
    SQLite its regular expression) cost more per statement than the database's work on a key
    lookup. On PostgreSQL the driver's cursor binds on the server, so that a statement run
    often enough is prepared (``prepare_threshold``: docs/deploy.md). ``prepare=False`` for a
    statement whose best plan depends on its values (a search's: how common the word or tag
    is): PostgreSQL may settle on one generic plan for a prepared statement.

    ``params`` None: ``sql`` holds its values already (``search.bound``), and may then be
    several statements separated by semicolons, which PostgreSQL takes in one round trip (the
    simple query protocol; ``result`` reads their results in turn with ``nextset``).
    """
    direct = _DIRECT.get(connection.vendor)
    if direct is not None and not connection.queries_logged and tracing.passes_straight_on(connection.execute_wrappers):
        connection.close_if_health_check_failed()
        if connection.connection is None:
            connection.ensure_connection()
        connection.validate_thread_sharing()
        connection.validate_no_broken_transaction()
        with connection.wrap_database_errors:
            opened = direct(connection, sql)
            if opened is not None:
                cursor, driver_sql, close = opened
                try:
                    if prepare or connection.vendor != "postgresql":
                        cursor.execute(driver_sql, params)
                    else:
                        cursor.execute(driver_sql, params, prepare=False)
                    return result(cursor)
                finally:
                    if close:
                        cursor.close()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return result(cursor)


def fetchone(cursor: Any) -> Any:
    return cursor.fetchone()


def fetchall(cursor: Any) -> list[Any]:
    return cursor.fetchall()


def rowcount(cursor: Any) -> int:
    return cursor.rowcount


def nothing(cursor: Any) -> None:
    return None
