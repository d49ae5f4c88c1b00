"""The driver call: a statement straight to the database driver, with Django's checks."""

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from django.db.backends.base.base import BaseDatabaseWrapper

T = TypeVar("T")


@functools.lru_cache(maxsize=512)
def _driver_sql(sql: str) -> str:
    """``sql`` in the SQLite driver's parameter style, converted as Django's SQLite cursor
    converts it on every call (``SQLiteCursorWrapper.convert_query``)."""
    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


def run(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], result: Callable[[Any], T]) -> T:
    """``with connection.cursor() as cursor: cursor.execute(sql, params); return result(cursor)``.

    On SQLite, while nothing watches Django's cursor layers (no execute wrappers, no query
    log: ``assertNumQueries``, ``DEBUG`` and the debug toolbar see every statement), the
    statement goes straight to the driver with the checks Django's cursor makes first
    (health check, connection, thread sharing, no broken transaction) and its error
    wrapping (``IntegrityError`` stays Django's). Django's cursor layers and its regular
    expression cost more per statement than SQLite's work on a key lookup.
    """
    if connection.vendor != "sqlite" or connection.execute_wrappers or connection.queries_logged:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return result(cursor)
    connection.close_if_health_check_failed()
    if connection.connection is None:
        connection.ensure_connection()
    connection.validate_thread_sharing()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors:
        cursor = connection.connection.cursor()
        try:
            cursor.execute(_driver_sql(sql), params)
            return result(cursor)
        finally:
            cursor.close()


def fetchone(cursor: Any) -> Any:
    return cursor.fetchone()


def fetchall(cursor: Any) -> list[Any]:
    return cursor.fetchall()


def rowcount(cursor: Any) -> int:
    return cursor.rowcount


def nothing(cursor: Any) -> None:
    return None
