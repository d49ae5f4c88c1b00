"""The one door between the services and selectors and the statements of the hot path.

Each function has two versions that give the same answers: the fast path's statements built
once per database (``notebook.sql``) and the plain Django ORM's querysets (``notebook.orm``).
``CODEX_FAST_PATH`` (a setting read once from the environment, on by default) picks the
fast path; ``CODEX_FAST_PATH=0`` runs every service and selector on the plain ORM, a way
back should the fast path ever be in doubt (docs/architecture.md). The setting is looked
up on each call, so that a test can switch it with ``override_settings``.
"""

import datetime as dt
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import connections, router
from django.db.models import Model

from notebook import orm
from notebook.models import Entry, EntryRelatedAgent, EntryRevision, EntryTag, RequestKey
from notebook.sql.converters import new_instance
from notebook.sql.search import SearchStatements
from notebook.sql.statements import Insert, KeyedRead, UpdateRow
from notebook.sql.usage import ChargeUsage
from notebook.sql.writes import SaveEntry, Updated, UpdateEntry

# Entry.objects.filter(codex_id=..., pk=...).first(), with and without FOR UPDATE.
_ENTRY_BY_ID = KeyedRead(Entry, ("codex_id", "id"))
_ENTRY_FOR_UPDATE = KeyedRead(Entry, ("codex_id", "id"), lock=True)
# Entry.objects.filter(codex_id=..., pk=...).update(every other field).
_UPDATE_ENTRY = UpdateRow(Entry, ("codex_id", "id"))
_INSERT = {model: Insert(model) for model in (Entry, RequestKey, EntryRevision, EntryTag, EntryRelatedAgent)}
_CHARGE = ChargeUsage()
# A save and an update as one statement each, on PostgreSQL.
_SAVE = SaveEntry()
_UPDATE = UpdateEntry()
# The search's candidate statements, rendered once per database and filter shape.
SEARCH = SearchStatements()


def fast() -> bool:
    return settings.CODEX_FAST_PATH


def entry_by_id(codex_id: int, entry_id: uuid.UUID, *, lock: bool = False) -> Entry | None:
    """The codex's entry with this id, or None (``lock``: FOR UPDATE where the backend has it)."""
    if not fast():
        return orm.entry_by_id(codex_id, entry_id, lock=lock)
    return (_ENTRY_FOR_UPDATE if lock else _ENTRY_BY_ID).first(codex_id, entry_id)


class EntryReadAhead:
    """The fast path's read of one entry of the caller's codex, made before the caller's codex
    is known: inside the statement that checks the caller's token, which gives the codex
    (``authserver.core.token_check``: one round trip for the check and the read, where they were
    two). The check hands the row over (``take``) only once it has read the token; whoever
    uses the entry must still know the token was accepted, and that the codex is the one
    the entry was read for (``entry_for``).

    ``kind`` builds the join (``joined``: ``LEFT JOIN`` on ``codex_id = <the check's codex
    key>`` and ``id = %s``), once per database for every read ahead; ``values`` are this
    read's parameters."""

    kind = _ENTRY_BY_ID

    def __init__(self, entry_id: uuid.UUID) -> None:
        self.entry_id = entry_id
        self.values = (entry_id,)
        self.taken = False
        self.entry: Entry | None = None

    def take(self, entry: Entry | None) -> None:
        self.entry = entry
        self.taken = True

    def entry_for(self, codex_id: int, entry_id: uuid.UUID) -> tuple[bool, Entry | None]:
        """(whether this read answers for ``codex_id``'s entry ``entry_id``, the entry or None)."""
        if not self.taken or entry_id != self.entry_id:
            return False, None
        if self.entry is None:
            # No row of the codex the token's user had when the check read it: a codex made
            # since (the user had none) holds no entry either, so the answer stands.
            return True, None
        return self.entry.codex_id == codex_id, self.entry


def entry_read_ahead(entry_id: uuid.UUID) -> EntryReadAhead | None:
    """A read ahead of ``entry_id`` for the token check to make; None on the plain ORM path."""
    return EntryReadAhead(entry_id) if fast() else None


def new_entry(**values: Any) -> Entry:
    """``Entry(**values)``, unsaved."""
    return new_instance(Entry, **values) if fast() else Entry(**values)


def insert_entry(entry: Entry) -> None:
    """``entry.save(force_insert=True)``."""
    if fast():
        _INSERT[Entry].rows([entry])
    else:
        orm.insert_entry(entry)


def insert_rows(model: type[Model], rows: Sequence[Mapping[str, Any]]) -> None:
    """Rows nothing reads back, by attname (every column but an auto key given)."""
    if fast():
        _INSERT[model].values(rows)
    else:
        orm.insert_rows(model, rows)


def update_entry(entry: Entry) -> int:
    """Write every field of ``entry`` but its keys, in an UPDATE that names its codex."""
    return _UPDATE_ENTRY.row(entry) if fast() else orm.update_entry(entry)


def charge(*, codex_id: int, entries: int, stored_bytes: int, stored_upto: int, entries_upto: int) -> int | None:
    """Add usage to the codex where it is within the bounds; its new write number, or None."""
    usage = {"entries": entries, "stored_bytes": stored_bytes, "stored_upto": stored_upto, "entries_upto": entries_upto}
    return _CHARGE.charge(codex_id=codex_id, **usage) if fast() else orm.charge(codex_id=codex_id, **usage)


def one_statement_writes() -> bool:
    """Whether a save and an update are one statement each (``save_entry``, ``update_entry_at``):
    the fast path on PostgreSQL. Otherwise the services send their statements one by one in a
    ``write_transaction`` (SQLite's write queue and group sync, or the plain ORM)."""
    return fast() and connections[router.db_for_write(Entry)].vendor == "postgresql"


def save_entry(
    entry: Entry,
    *,
    request_id: str,
    fingerprint: str,
    writer: Mapping[str, Any],
    charge: Mapping[str, int],
) -> int | None:
    """A new entry with its request key, revision 1 and index rows, charged ``charge``
    (``quotas.bounds``), in one statement: the entry's write number, or None if the charge
    was refused (nothing written). A request id already used raises ``IntegrityError``."""
    return _SAVE.save(entry, request_id=request_id, fingerprint=fingerprint, writer=writer, **charge)


def update_entry_at(
    entry: Entry,
    *,
    expected_revision: int,
    now: dt.datetime,
    writer: Mapping[str, Any],
    charge: Mapping[str, int],
) -> Updated:
    """Replace the entry ``entry.id`` by ``entry``'s input columns if it is at
    ``expected_revision``, with its new revision and index rows, charged ``charge``, in one
    statement; what it found (``notebook.sql.writes.Updated``)."""
    return _UPDATE.update(entry, expected_revision=expected_revision, now=now, writer=writer, **charge)


def search_candidates(codex_id: int, *, limit: int, **filters: Any) -> list[Entry]:
    """A search page's candidates in id order (``orm.search_candidates`` says which)."""
    if fast():
        return SEARCH.candidates(codex_id=codex_id, limit=limit, **filters)
    return orm.search_candidates(codex_id, limit=limit, **filters)


def search_window_end(codex_id: int, *, offset: int, **filters: Any) -> uuid.UUID | None:
    """Where a query's walk window ends (``orm.search_window_end``)."""
    if fast():
        return SEARCH.window_end(codex_id=codex_id, offset=offset, **filters)
    return orm.search_window_end(codex_id, offset=offset, **filters)
