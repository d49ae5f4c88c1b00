"""A caller's precondition, checked inside the statement it rides in (the fast path's writes,
``notebook.sql.writes``, and a search's first statement, ``notebook.sql.search``).

A caller may hand a statement a condition of its own (``Precondition``: in this project, that
the call's token is still exactly what its last check accepted, ``authserver.token_check``).
The statement holds it as a CTE (``precondition``: a row exactly when it holds), evaluated once
in the statement's own snapshot: a write writes nothing, and a read returns no row of its own,
unless the row exists. Either way the statement answers whether it held, and the caller is
told with ``PreconditionFailed``. So a check that was a statement of its own rides in the
statement the call makes anyway: one round trip where there were two.
"""

import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from django.db.backends.base.base import BaseDatabaseWrapper

from notebook.exceptions import PreconditionFailed


class PreconditionKind(Protocol):
    def condition(self, connection: BaseDatabaseWrapper) -> str:
        """A SELECT that returns a row exactly when the condition holds, its parameters named
        ``%(name)s`` with names that begin with ``precondition_`` (a statement's own never do)."""


class Precondition(Protocol):
    """A condition of the caller's for a statement to check (the module's docstring)."""

    kind: PreconditionKind  # one statement is built per database and kind
    params: Mapping[str, Any]

    def held(self) -> None:
        """Called once a statement has found that the condition holds."""


# The CTE that holds the precondition's row, and the test of it that a statement's parts add.
CTE = "precondition"
HOLDS = f"EXISTS (SELECT FROM {CTE})"

_NAMED = re.compile(r"%\((\w+)\)s")


def cte(kind: PreconditionKind, connection: BaseDatabaseWrapper) -> tuple[str, str]:
    """The ``(name, body)`` of the precondition's CTE, its parameters named."""
    return CTE, f"({kind.condition(connection)})"


def carrying_read(
    kind: PreconditionKind, connection: BaseDatabaseWrapper, select: str, order: str
) -> tuple[str, tuple[str, ...]]:
    """``select`` (a read with positional parameters, its own ORDER BY and LIMIT) carrying the
    precondition: its rows, each after a first column that says whether the precondition held,
    and one row of NULLs after it when it did not or ``select`` found nothing; in ``order``
    (the name of one of ``select``'s columns). With the names of the precondition's parameters,
    which come before ``select``'s."""
    condition = kind.condition(connection)
    names = tuple(_NAMED.findall(condition))
    sql = (
        f"WITH {CTE} AS ({_NAMED.sub('%s', condition)})"
        f" SELECT {HOLDS}, carried.* FROM (SELECT 1) AS one"
        f" LEFT JOIN ({select}) AS carried ON {HOLDS} ORDER BY carried.{connection.ops.quote_name(order)}"
    )
    return sql, names


def carried_rows(precondition: Precondition, rows: Sequence[Sequence[Any]], key: int) -> list[Sequence[Any]]:
    """The rows of the read ``carrying_read`` wrapped (``key``: the position of a column never
    NULL in them), or ``PreconditionFailed``."""
    if not rows or not rows[0][0]:
        raise PreconditionFailed("the statement's precondition did not hold; nothing was read")
    precondition.held()
    return [row[1:] for row in rows if row[1 + key] is not None]


def checked(precondition: Precondition | None, row: Sequence[Any]) -> Sequence[Any]:
    """A write's answer without its last column, which says whether the precondition held,
    if it had one: ``PreconditionFailed`` if not."""
    if precondition is None:
        return row
    if not row[-1]:
        raise PreconditionFailed("the write's precondition did not hold; nothing was written")
    precondition.held()
    return row[:-1]
