"""A save and an update on PostgreSQL, each one statement: the fast path's write statements.

On PostgreSQL every statement is a round trip to the server, and a write sent statement by
statement is eight or nine of them (BEGIN, the quota charge, the entry, the request key, the
revision, the tag rows, the agent rows, COMMIT; an update also reads the entry first). Here
each is one statement of data-modifying CTEs (``WITH ... UPDATE/INSERT/DELETE ... RETURNING``)
sent in autocommit, where a statement is its own transaction: one round trip, and all of it
or none of it is written.

What the statements keep, each as ``notebook.services`` keeps it on the other paths:

- **The charge first.** The quota charge (``quotas.charge``'s conditional UPDATE of the codex
  row) comes first and every other row is written ``FROM`` its result: a refused charge
  returns no row, so nothing is written. The UPDATE takes the codex row's lock until the
  statement commits, so usage is exact under concurrency and write numbers follow the
  commit order.
- **One snapshot.** The sub-statements of one statement see the same snapshot and not one
  another's rows, in an order PostgreSQL chooses. So every row derived from another is built
  from that one's ``RETURNING``: the revision is a copy of the entry row as written, the
  request key names it, and the tag and agent rows are its ``tags`` and
  ``related_agent_ids`` arrays (``jsonb_array_elements_text``), never values sent twice.
- **Save.** The request key's unique constraint decides concurrent identical saves, as on
  the other paths: the loser's statement fails whole (``IntegrityError``) and the service
  reads the winner's entry.
- **Update.** The entry row is locked first (``SELECT ... FOR UPDATE``, as
  ``store.entry_by_id(lock=True)``), and the charge, the UPDATE and the revision happen only
  if the locked row (its latest version) is at the expected revision. Locks are taken in the
  order of the other paths and of ``entry_delete`` (the entry's row, then the codex's), so
  no two writes wait on each other in a cycle. The UPDATE computes
  from the row it updates (``revision + 1``, ``GREATEST(now, created_at)``), so it numbers
  from the latest version even where the statement's snapshot is older. The statement's
  answer tells a missing entry (no revision), a conflict (another revision) and a refused
  charge (no write number) apart; the service words each as on the other paths.
- **Index rows.** An update deletes the tag and agent rows whose value left the entry and
  inserts those whose value is new: the DELETE and the INSERT never touch the same
  (entry, value) row, whatever order they run in, and unchanged values cost no write.

Inside a transaction (a test's, or a caller's ``atomic`` block) the statement runs in a
savepoint, so that its failure (a replayed save's collision) leaves the transaction usable,
as ``write_transaction``'s nested ``atomic`` does.
"""

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from django.db import connections, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import CharField, Field, Model, TextField

from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag, RequestKey
from notebook.sql.cache import PerDatabase
from notebook.sql.converters import preparer
from notebook.sql.driver import fetchone, run

# The Entry columns an input decides (``services.apply_input`` sets them): an update sends
# these and computes the rest. Any other column must be one the write itself decides
# (``_WRITE_COLUMNS``): the build refuses a new column that is neither, so that an update
# can never reset a column it does not know about.
INPUT_COLUMNS = (
    "title",
    "content",
    "content_bytes",
    "tags",
    "related_agent_ids",
    "provenance",
    "search_title",
    "search_content",
    "search_tags",
    "search_tags_text",
)
_WRITE_COLUMNS = ("id", "codex_id", "revision", "created_at", "updated_at", "write_seq")

# A revision is a snapshot of its entry as written: its columns from the entry's, by attname.
_SNAPSHOT = {
    "codex_id": "codex_id",
    "entry_id": "id",
    "revision": "revision",
    "title": "title",
    "content": "content",
    "tags": "tags",
    "related_agent_ids": "related_agent_ids",
    "provenance": "provenance",
    "recorded_at": "updated_at",
}
# What the revision's copy, the request key and the index rows read from the entry written.
_RETURNED = (*_SNAPSHOT.values(), "created_at")
# The revision's columns sent as values (``Writer.columns``), in the table's column order.
_WRITER = [field for field in EntryRevision._meta.local_concrete_fields if field.attname.startswith("writer_")]
# (model, the Entry column its values come from) of the exact index rows.
_INDEX_ROWS = ((EntryTag, "tags"), (EntryRelatedAgent, "related_agent_ids"))

# The fields sent as parameters by one statement, each with its preparer (``converters.preparer``).
Prepared = list[tuple[Field, Callable[[Any], Any]]]


def _param(field: Field, connection: BaseDatabaseWrapper, name: str = "") -> str:
    """The named parameter ``name`` (by default the field's attname), typed as the field's
    column: in ``INSERT ... SELECT`` a parameter is not given its column's type as in
    ``INSERT ... VALUES``. Strings are sent as text, which a varchar column takes with its
    length checked (a cast to varchar(n) would cut them silently)."""
    column_type = "text" if isinstance(field, CharField | TextField) else field.db_type(connection)
    return f"%({name or field.attname})s::{column_type}"


def _prepared(fields: Sequence[Field], connection: BaseDatabaseWrapper) -> Prepared:
    return [(field, preparer(field, connection)) for field in fields]


class _Sql:
    """The pieces of the write statements, with names quoted for one connection. Parameters
    are named (``%(name)s``): an entry's by attname, the charge's as ``quotas.bounds`` names
    them, the writer's as ``Writer.columns`` does."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self.quote = connection.ops.quote_name
        unknown = {field.attname for field in Entry._meta.concrete_fields} - {*INPUT_COLUMNS, *_WRITE_COLUMNS}
        if unknown:
            raise RuntimeError(f"notebook.sql.writes does not know how a save or an update writes {sorted(unknown)}")

    def table(self, model: type[Model]) -> str:
        return self.quote(model._meta.db_table)

    def column(self, model: type[Model], attname: str, source: str = "") -> str:
        """``source.column`` of the field named by ``attname`` (``codex_id``, not ``codex``)."""
        (field,) = [field for field in model._meta.concrete_fields if field.attname == attname]
        return f"{source}.{self.quote(field.column)}" if source else self.quote(field.column)

    def entry(self, attname: str, source: str = "") -> str:
        return self.column(Entry, attname, source)

    def columns(self, attnames: Sequence[str], source: str = "") -> str:
        return ", ".join(self.entry(attname, source) for attname in attnames)

    def insert(self, model: type[Model], values: Mapping[str, str], tail: str) -> str:
        """``INSERT INTO model (every column but an auto key) SELECT values[column] tail``.
        Every column must be given its expression: a new column cannot be left out unnoticed."""
        meta = model._meta
        attnames = [field.attname for field in meta.local_concrete_fields if field is not meta.auto_field]
        if set(attnames) != set(values):
            raise RuntimeError(f"{model.__name__}'s columns are {sorted(attnames)}, not {sorted(values)}")
        columns = ", ".join(self.column(model, attname) for attname in attnames)
        selected = ", ".join(values[attname] for attname in attnames)
        return f"INSERT INTO {self.table(model)} ({columns}) SELECT {selected} {tail}"

    def charge(self, only_if: str = "") -> str:
        """``quotas.charge``'s conditional UPDATE (as ``notebook.sql.usage`` sends it alone),
        returning the codex's new write number."""
        count, stored, seq = (self.column(Codex, name) for name in ("entry_count", "stored_bytes", "last_write_seq"))
        return (
            f"UPDATE {self.table(Codex)}"
            f" SET {count} = {count} + %(entries)s, {stored} = {stored} + %(stored_bytes)s, {seq} = {seq} + 1"
            f" WHERE {self.column(Codex, 'id')} = %(codex_id)s"
            f" AND {stored} <= %(stored_upto)s AND {count} <= %(entries_upto)s{only_if}"
            f" RETURNING {seq} AS write_seq"
        )

    def revision(self) -> str:
        """The revision: a copy of the row ``entry`` returned, and its writer."""
        values = {attname: self.entry(column, "entry") for attname, column in _SNAPSHOT.items()}
        values |= {field.attname: _param(field, self.connection) for field in _WRITER}
        return self.insert(EntryRevision, values, "FROM entry")

    def index_rows(self, model: type[Model], attname: str, *, new_since: str = "") -> str:
        """A row of ``model`` for each value of the JSON array ``attname`` of the row ``entry``
        returned; with ``new_since``, only for values that row (the entry before) did not hold."""
        values = {"codex_id": self.entry("codex_id", "entry"), "entry_id": self.entry("id", "entry"), "value": "item"}
        tail = f"FROM entry CROSS JOIN jsonb_array_elements_text({self.entry(attname, 'entry')}) AS item"
        if new_since:
            tail += f" CROSS JOIN {new_since} WHERE NOT ({self.entry(attname, new_since)} ? item)"
        return self.insert(model, values, tail)

    def removed_index_rows(self, model: type[Model], attname: str) -> str:
        """Delete the rows of ``model`` of the row ``entry`` returned whose value is not in its
        JSON array ``attname``."""
        codex_id, entry_id, value = (self.column(model, name, "r") for name in ("codex_id", "entry_id", "value"))
        return (
            f"DELETE FROM {self.table(model)} AS r USING entry"
            f" WHERE {codex_id} = {self.entry('codex_id', 'entry')} AND {entry_id} = {self.entry('id', 'entry')}"
            f" AND NOT ({self.entry(attname, 'entry')} ? {value})"
        )


def _statement(ctes: Sequence[tuple[str, str]], select: str) -> str:
    return "WITH " + ", ".join(f"{name} AS {body}" for name, body in ctes) + f" SELECT {select}"


def _run(alias: str, sql: str, params: Mapping[str, Any]) -> Any:
    """The statement's one row. In autocommit the statement is its own transaction; inside
    a transaction it runs in a savepoint (see the module's docstring)."""
    connection = connections[alias]
    if transaction.get_autocommit(using=alias):
        return run(connection, sql, params, fetchone)
    with transaction.atomic(using=alias):
        return run(connection, sql, params, fetchone)


def _writer(writer: Mapping[str, Any]) -> dict[str, Any]:
    return {field.attname: writer[field.attname] for field in _WRITER}


class SaveEntry(PerDatabase):
    """A new entry at revision 1 with its request key, revision and index rows, and the
    quota charge, in one statement (see the module's docstring)."""

    def build(self, connection: BaseDatabaseWrapper) -> tuple[str, Prepared]:
        sql = _Sql(connection)
        given = [field for field in Entry._meta.local_concrete_fields if field.attname != "write_seq"]
        entry = {field.attname: _param(field, connection) for field in given} | {"write_seq": "charge.write_seq"}
        key_fields = {field.attname: field for field in RequestKey._meta.local_concrete_fields}
        key = {
            "codex_id": sql.entry("codex_id", "entry"),
            "entry_id": sql.entry("id", "entry"),
            "created_at": sql.entry("created_at", "entry"),
            "request_id": _param(key_fields["request_id"], connection),
            "fingerprint": _param(key_fields["fingerprint"], connection),
        }
        ctes = [
            ("charge", f"({sql.charge()})"),
            ("entry", f"({sql.insert(Entry, entry, f'FROM charge RETURNING {sql.columns(_RETURNED)}')})"),
            ("request_key", f"({sql.insert(RequestKey, key, 'FROM entry')})"),
            ("revision", f"({sql.revision()})"),
            *((f"{model._meta.model_name}_rows", f"({sql.index_rows(model, name)})") for model, name in _INDEX_ROWS),
        ]
        return _statement(ctes, "write_seq FROM charge"), _prepared(given, connection)

    def save(
        self, entry: Entry, *, request_id: str, fingerprint: str, writer: Mapping[str, Any], **charge: int
    ) -> int | None:
        """Write ``entry`` (unsaved, every column but ``write_seq`` set) and its rows, with
        the quota charge (``charge``: ``quotas.bounds``'s). Returns the entry's write number,
        or None if the charge was refused (then nothing is written). A request id already
        used in the codex raises ``IntegrityError`` (and nothing is written)."""
        alias = router.db_for_write(Entry)
        statement, given = self.built(alias)
        params = {field.attname: prepare(field.pre_save(entry, True)) for field, prepare in given}
        params |= {**charge, "request_id": request_id, "fingerprint": fingerprint, **_writer(writer)}
        row = _run(alias, statement, params)
        if row is None:
            return None
        entry.write_seq = row[0]
        entry._state.adding = False
        entry._state.db = alias
        return entry.write_seq


class Updated(NamedTuple):
    """What an update found: the entry's revision (None: no such entry in the codex), and,
    when that was the one expected, whether the charge was made (then so was the update)."""

    revision: int | None
    charged: bool


class UpdateEntry(PerDatabase):
    """An entry replaced at its expected revision, with the new revision's snapshot, the
    changed index rows and the quota charge, in one statement (see the module's docstring)."""

    def build(self, connection: BaseDatabaseWrapper) -> tuple[str, Prepared]:
        sql = _Sql(connection)
        given = [field for field in Entry._meta.concrete_fields if field.attname in INPUT_COLUMNS]
        # The entry row, locked: its latest version, whatever the statement's snapshot saw.
        locked = (
            f"MATERIALIZED (SELECT {sql.columns(('id', 'codex_id', 'revision', 'tags', 'related_agent_ids'))}"
            f" FROM {sql.table(Entry)} WHERE {sql.entry('codex_id')} = %(codex_id)s AND {sql.entry('id')} = %(id)s"
            " FOR UPDATE)"
        )
        # Charged only if the locked row is at the expected revision.
        charge = sql.charge(f" AND EXISTS (SELECT FROM locked WHERE {sql.entry('revision', 'locked')} = %(expected)s)")
        # The rest computed from the row updated: the latest version, under the lock.
        now = _param(Entry._meta.get_field("updated_at"), connection, "now")
        assignments = [f"{sql.entry(field.attname)} = {_param(field, connection)}" for field in given]
        assignments += [
            f"{sql.entry('revision')} = {sql.entry('revision', 'e')} + 1",
            f"{sql.entry('updated_at')} = GREATEST({now}, {sql.entry('created_at', 'e')})",
            f"{sql.entry('write_seq')} = charge.write_seq",
        ]
        entry = (
            f"UPDATE {sql.table(Entry)} AS e SET {', '.join(assignments)} FROM locked CROSS JOIN charge"
            f" WHERE {sql.entry('codex_id', 'e')} = {sql.entry('codex_id', 'locked')}"
            f" AND {sql.entry('id', 'e')} = {sql.entry('id', 'locked')}"
            f" RETURNING {sql.columns(_RETURNED, 'e')}"
        )
        ctes = [
            ("locked", locked),
            ("charge", f"({charge})"),
            ("entry", f"({entry})"),
            ("revision", f"({sql.revision()})"),
        ]
        for model, name in _INDEX_ROWS:
            ctes.append((f"{model._meta.model_name}_removed", f"({sql.removed_index_rows(model, name)})"))
            ctes.append((f"{model._meta.model_name}_added", f"({sql.index_rows(model, name, new_since='locked')})"))
        select = ", ".join(
            [
                f"(SELECT {sql.entry('revision', 'locked')} FROM locked)",
                "(SELECT write_seq FROM charge)",
                f"(SELECT {sql.entry('created_at', 'entry')} FROM entry)",
                f"(SELECT {sql.entry('updated_at', 'entry')} FROM entry)",
            ]
        )
        # Sent: the input columns and the entry's keys.
        keys = [Entry._meta.get_field(name) for name in ("id", "codex")]
        return _statement(ctes, select), _prepared([*given, *keys], connection)

    def update(
        self, entry: Entry, *, expected_revision: int, now: dt.datetime, writer: Mapping[str, Any], **charge: int
    ) -> Updated:
        """Replace the codex's entry ``entry.id`` by the input columns of ``entry`` if it is at
        ``expected_revision``, with the quota charge (``charge``: ``quotas.bounds``'s). On
        success ``entry`` is given the stored revision, times and write number."""
        alias = router.db_for_write(Entry)
        statement, given = self.built(alias)
        params = {field.attname: prepare(getattr(entry, field.attname)) for field, prepare in given}
        params |= {"expected": expected_revision, "now": now}
        params |= {**charge, **_writer(writer)}
        revision, write_seq, created_at, updated_at = _run(alias, statement, params)
        if revision != expected_revision or write_seq is None:
            return Updated(revision, charged=False)
        entry.revision = revision + 1
        entry.created_at, entry.updated_at, entry.write_seq = created_at, updated_at, write_seq
        entry._state.adding = False
        entry._state.db = alias
        return Updated(revision, charged=True)
