"""Writes. Each public service is one transaction and enforces contract sections 2-5."""

import datetime as dt
import uuid

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import IntegrityError
from django.utils import timezone

from notebook import quotas, store
from notebook.exceptions import Conflict, NotFound, ResourceExhausted
from notebook.models import SEARCH_TAGS_SEPARATOR, Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag, RequestKey
from notebook.selectors import NOT_FOUND_MESSAGE
from notebook.transactions import wait_durable, write_transaction
from notebook.validation import EntryInput, normalize_for_search
from notebook.writers import UNKNOWN_WRITER, Writer


def _now() -> dt.datetime:
    """Now, truncated to the millisecond the contract shows, so stored and shown times agree."""
    now = timezone.now()
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def codex_for_user(*, user: AbstractBaseUser) -> Codex:
    """The user's codex, created on first use. Concurrent first calls create one codex.

    A user loaded with ``select_related("codex")`` answers without another query.
    """
    try:
        return user.codex
    except Codex.DoesNotExist:
        codex, _ = Codex.objects.get_or_create(owner=user)
        return codex


def apply_input(entry: Entry, data: EntryInput) -> None:
    """Copy a complete entry input onto ``entry``: omitted optional fields are removed.

    The one place an entry's fields and search columns are derived from an input (the
    services and the import use it)."""
    entry.title = data.title
    entry.content = data.content
    entry.content_bytes = len(data.content.encode("utf-8"))
    entry.tags = list(data.tags)
    entry.related_agent_ids = list(data.related_agent_ids)
    entry.provenance = data.provenance
    entry.search_title = normalize_for_search(data.title or "")
    entry.search_content = normalize_for_search(data.content)
    entry.search_tags = [normalize_for_search(tag) for tag in data.tags]
    entry.search_tags_text = SEARCH_TAGS_SEPARATOR.join(entry.search_tags)


def _record(
    entry: Entry, writer: Writer, *, old_tags: list[str] | None = None, old_agents: list[str] | None = None
) -> None:
    """Snapshot the entry's new revision (with who wrote it) and write its exact tag/agent index rows.

    For an update, ``old_tags``/``old_agents`` are the entry's previous values: index rows
    are rewritten only where they changed, and an empty list costs no statement.
    """
    # Rows nothing reads back: inserted from their values (on the fast path no model instances).
    store.insert_rows(
        EntryRevision,
        [
            {
                "codex_id": entry.codex_id,
                "entry_id": entry.id,
                "revision": entry.revision,
                "title": entry.title,
                "content": entry.content,
                "tags": entry.tags,
                "related_agent_ids": entry.related_agent_ids,
                "provenance": entry.provenance,
                "recorded_at": entry.updated_at,
                **writer.columns(),
            }
        ],
    )
    for model, old, new in ((EntryTag, old_tags, entry.tags), (EntryRelatedAgent, old_agents, entry.related_agent_ids)):
        if old == new:
            continue
        if old:
            model.objects.filter(codex_id=entry.codex_id, entry=entry).delete()
        store.insert_rows(model, [{"codex_id": entry.codex_id, "entry_id": entry.id, "value": value} for value in new])


def _replay(key: RequestKey, data: EntryInput) -> Entry:
    if key.fingerprint != data.fingerprint:
        raise Conflict(
            f"requestId {key.request_id!r} was already used to save different entry input; "
            "use a new requestId for a new entry"
        )
    # The entry's current state (read with the key), which may be a later revision than the one saved.
    return key.entry


def _conflict(current: int, expected: int) -> Conflict:
    return Conflict(
        f"entry is at revision {current}, not {expected}; get the latest entry, reconcile, and send a new replacement"
    )


def entry_save(
    *,
    codex: Codex,
    request_id: str,
    data: EntryInput,
    writer: Writer = UNKNOWN_WRITER,
) -> Entry:
    """Create an entry at revision 1, idempotently by ``request_id`` within the codex.

    ``writer`` (the application behind the call) is recorded on revision 1; the tools
    always pass it, and a caller that does not (a shell, a test) records "unknown". A
    replayed save records nothing, so the writer stays that of the first save.

    The same request id with the same input returns the entry's current state; with
    other input it is a conflict. Concurrent identical saves all insert-then-collide
    on the request key's unique constraint, so exactly one entry is created and every
    caller gets it back.
    """
    now = _now()
    entry = store.new_entry(codex=codex, revision=1, created_at=now, updated_at=now)
    apply_input(entry, data)
    stored_bytes = quotas.input_bytes(data)
    try:
        # Insert first, then handle the duplicate (as contrib.sessions does). The
        # transaction is the whole write, so a fresh save (the common case) costs no
        # pre-read and no savepoint; a collision rolls it all back (usage included) and
        # the winner, committed by then, is read after it.
        if store.one_statement_writes():
            # The whole write as one statement, its own transaction (notebook.sql.writes).
            write_seq = store.save_entry(
                entry,
                request_id=request_id,
                fingerprint=data.fingerprint,
                writer=writer.columns(),
                charge=quotas.bounds(entries=1, stored_bytes=stored_bytes),
            )
            if write_seq is None:
                quotas.refuse(codex=codex, entries=1, stored_bytes=stored_bytes)
        else:
            with write_transaction():
                # Usage first: a save past a quota writes nothing.
                entry.write_seq = quotas.charge(codex=codex, entries=1, stored_bytes=stored_bytes)
                store.insert_entry(entry)
                store.insert_rows(
                    RequestKey,
                    [
                        {
                            "codex_id": codex.pk,
                            "request_id": request_id,
                            "fingerprint": data.fingerprint,
                            "entry_id": entry.id,
                            "created_at": now,
                        }
                    ],
                )
                _record(entry, writer)
    except (IntegrityError, ResourceExhausted):
        # A replayed save answers with its entry even when the codex is full now.
        # The entry named by the codex too, as every notebook statement names it (docs/capacity.md).
        key = (
            RequestKey.objects.select_related("entry")
            .filter(codex=codex, request_id=request_id, entry__codex=codex)
            .first()
        )
        if key is None:
            raise
        # The save that won may still be syncing its commit: answer once it is on disk.
        wait_durable()
        return _replay(key, data)
    return entry


def entry_update(
    *,
    codex: Codex,
    entry_id: uuid.UUID,
    expected_revision: int,
    data: EntryInput,
    writer: Writer = UNKNOWN_WRITER,
) -> Entry:
    """Replace an entry completely if its revision is still ``expected_revision``.

    ``writer`` is recorded on the new revision (see ``entry_save``).

    The row lock serialises concurrent updates: of any number that expect the same
    revision, exactly one succeeds and the rest see the new revision and conflict.
    """
    if not store.one_statement_writes():
        return _update_in_transaction(
            codex=codex, entry_id=entry_id, expected_revision=expected_revision, data=data, writer=writer
        )
    # The whole write as one statement, its own transaction (notebook.sql.writes): the
    # entry row locked, then the charge, the UPDATE and the revision only at the expected
    # revision. Nothing of the entry is read before: the input decides every column the
    # update sends, and the statement computes the others from the locked row.
    entry = store.new_entry(id=entry_id, codex_id=codex.pk, revision=expected_revision + 1)
    apply_input(entry, data)
    stored_bytes = quotas.input_bytes(data)
    found = store.update_entry_at(
        entry,
        expected_revision=expected_revision,
        now=_now(),
        writer=writer.columns(),
        charge=quotas.bounds(entries=0, stored_bytes=stored_bytes),
    )
    if found.revision is None:
        raise NotFound(NOT_FOUND_MESSAGE)
    if found.revision != expected_revision:
        raise _conflict(found.revision, expected_revision)
    if not found.charged:
        quotas.refuse(codex=codex, entries=0, stored_bytes=stored_bytes)
    return entry


@write_transaction()
def _update_in_transaction(
    *, codex: Codex, entry_id: uuid.UUID, expected_revision: int, data: EntryInput, writer: Writer
) -> Entry:
    """``entry_update`` as statements one by one in a write transaction (SQLite, the plain ORM)."""
    # FOR UPDATE: serialise revision numbers (left out on SQLite, whose IMMEDIATE
    # transactions already serialise writers).
    entry = store.entry_by_id(codex.pk, entry_id, lock=True)
    if entry is None:
        raise NotFound(NOT_FOUND_MESSAGE)
    if entry.revision != expected_revision:
        raise _conflict(entry.revision, expected_revision)
    write_seq = quotas.charge(codex=codex, entries=0, stored_bytes=quotas.input_bytes(data))
    old_tags, old_agents = list(entry.tags), list(entry.related_agent_ids)
    apply_input(entry, data)
    entry.revision += 1
    entry.write_seq = write_seq
    entry.updated_at = max(_now(), entry.created_at)
    # Not entry.save(), whose UPDATE names only the primary key: every notebook query
    # names its codex, so the tables can be distributed by codex (docs/capacity.md).
    store.update_entry(entry)
    _record(entry, writer, old_tags=old_tags, old_agents=old_agents)
    return entry


# How many entries one DELETE statement removes when a whole codex is cleared: bounded
# batches keep memory flat however large the codex is (Django's delete collector loads
# the rows it deletes).
_DELETE_BATCH = 1_000


def _delete_entries(codex: Codex, entry_ids: list[uuid.UUID]) -> None:
    """Remove entries and every row that hangs off them: revisions, tag and agent index
    rows, and request keys (so a replayed save's request id no longer names the entry);
    and give their usage back to the codex's quotas. Every statement names the codex."""
    revisions = EntryRevision.objects.filter(codex=codex, entry_id__in=entry_ids)
    freed = quotas.revisions_bytes(revisions)
    RequestKey.objects.filter(codex=codex, entry_id__in=entry_ids).delete()
    EntryTag.objects.filter(codex=codex, entry_id__in=entry_ids).delete()
    EntryRelatedAgent.objects.filter(codex=codex, entry_id__in=entry_ids).delete()
    revisions.delete()
    # The entries' own DELETE alone: nothing refers to them any more, and Django's collector
    # would look for their rows again by entry id alone, a statement naming no codex
    # (common/internals.py).
    entries = Entry.objects.filter(codex=codex, pk__in=entry_ids)
    deleted = entries._raw_delete(entries.db)
    quotas.release(codex=codex, entries=deleted, stored_bytes=freed)


@write_transaction()
def entry_delete(*, codex: Codex, entry_id: uuid.UUID) -> None:
    """Delete one entry of this codex with all its rows (contract 9); ``not_found`` if it
    is missing or in another codex. The row lock makes a concurrent update wait and then
    find nothing, rather than record a revision of a deleted entry."""
    # select_for_update: a concurrent entry_update on this row waits for us.
    entry = Entry.objects.select_for_update().filter(codex=codex, pk=entry_id).only("pk").first()
    if entry is None:
        raise NotFound(NOT_FOUND_MESSAGE)
    _delete_entries(codex, [entry.pk])


@write_transaction()
def codex_clear(*, codex: Codex) -> int:
    """Delete every entry of this codex (with all their rows) and return how many.

    The codex itself stays: it belongs to the person, and the next save uses it.
    """
    deleted = 0
    while True:
        batch = list(Entry.objects.filter(codex=codex).order_by("pk").values_list("pk", flat=True)[:_DELETE_BATCH])
        if not batch:
            return deleted
        _delete_entries(codex, batch)
        deleted += len(batch)


def codex_delete(*, codex: Codex) -> int:
    """Delete this codex: every entry with all its rows (``codex_clear``, in batches), then
    the codex itself, when its owner leaves. Returns how many entries went. Run again after
    a failure, it finishes what was left."""
    deleted = codex_clear(codex=codex)
    _delete_codex_row(codex)
    return deleted


@write_transaction()
def _delete_codex_row(codex: Codex) -> None:
    # The codex row locked first: a save between the clear and here has committed, and a
    # later one waits for this, then finds no codex. Its entries go as every other's did, so
    # that the collector below finds none (it would look for their rows by entry id alone).
    locked = Codex.objects.select_for_update().filter(pk=codex.pk).values_list("pk", flat=True)
    if not locked:
        return
    left = list(Entry.objects.filter(codex=codex).values_list("pk", flat=True))
    if left:
        _delete_entries(codex, left)
    Codex.objects.filter(pk=codex.pk).delete()
