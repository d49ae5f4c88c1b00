"""A caller's precondition, checked inside the write it rides in (PostgreSQL's one-statement
writes, ``notebook.sql.writes``).

A caller may hand a write a condition of its own (``Precondition``: in this project, that the
call's token is still exactly what its last check accepted, ``authserver.token_check``). The
statement holds it as a CTE (``precondition``: a row exactly when it holds), evaluated once in
the statement's own snapshot: nothing is written unless the row exists, and the statement
answers whether it did, the caller being told with ``PreconditionFailed``. So a check that was
a statement of its own rides in the statement the call makes anyway: one round trip where
there were two.

Only writes carry one. A search's statements are planned on every call (their best plan depends
on how common the word or tag is), and carrying the check's joins there cost PostgreSQL more
CPU than the round trip saved (docs/performance.md).
"""

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


def cte(kind: PreconditionKind, connection: BaseDatabaseWrapper) -> tuple[str, str]:
    """The ``(name, body)`` of the precondition's CTE, its parameters named."""
    return CTE, f"({kind.condition(connection)})"


def checked(precondition: Precondition | None, row: Sequence[Any]) -> Sequence[Any]:
    """A write's answer without its last column, which says whether the precondition held,
    if it had one: ``PreconditionFailed`` if not."""
    if precondition is None:
        return row
    if not row[-1]:
        raise PreconditionFailed("the write's precondition did not hold; nothing was written")
    precondition.held()
    return row[:-1]
