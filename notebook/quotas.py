"""Per-codex quotas: how many entries a codex holds and how many bytes it stores.

Usage lives in two columns of ``Codex`` that the services change in the same
transaction as the write they count, with one conditional ``UPDATE`` that is also
the quota check: cheap at any size (never a ``COUNT(*)``), exact under concurrency
(the update takes the codex row's lock, so concurrent writes to one codex queue
there), and shared by every worker and host because it is in the database.

Limits come from settings (``CODEX_QUOTA_ENTRIES``, ``CODEX_QUOTA_STORED_BYTES``).
"""

from collections.abc import Iterable
from typing import Any, NoReturn

from django.conf import settings
from django.db.models import Count, F, QuerySet, Sum
from django.db.models.functions import Greatest

import codex_metrics
from notebook import store
from notebook.exceptions import Internal, ResourceExhausted
from notebook.models import Codex, EntryRevision
from notebook.validation import EntryInput, canonical_json


def snapshot_bytes(
    *, content: str, title: str | None, tags: Iterable[str], related_agent_ids: Iterable[str], provenance: Any
) -> int:
    """What one revision stores, in UTF-8 bytes: content, title, tags, related agent ids
    and compact provenance JSON."""
    total = len(content.encode("utf-8"))
    total += len(title.encode("utf-8")) if title is not None else 0
    total += sum(len(value.encode("utf-8")) for value in (*tags, *related_agent_ids))
    if provenance is not None:
        total += len(canonical_json(provenance).encode("utf-8"))
    return total


def input_bytes(data: EntryInput) -> int:
    """What one revision of this input stores. Every revision is kept, so every save and
    update adds this much."""
    return snapshot_bytes(
        content=data.content,
        title=data.title,
        tags=data.tags,
        related_agent_ids=data.related_agent_ids,
        provenance=data.provenance,
    )


def revisions_bytes(revisions: QuerySet[EntryRevision]) -> int:
    """What these stored revisions count against the quota (read in batches)."""
    fields = ("content", "title", "tags", "related_agent_ids", "provenance")
    return sum(
        snapshot_bytes(**dict(zip(fields, row, strict=True)))
        for row in revisions.values_list(*fields).iterator(chunk_size=500)
    )


def release(*, codex: Codex, entries: int, stored_bytes: int) -> None:
    """Give back usage when entries are deleted; call it inside the delete's transaction."""
    Codex.objects.filter(pk=codex.pk).update(
        entry_count=Greatest(F("entry_count") - entries, 0),
        stored_bytes=Greatest(F("stored_bytes") - stored_bytes, 0),
    )


_NO_BOUND = 2**63 - 1  # above any count a PositiveBigIntegerField holds


def bounds(*, entries: int, stored_bytes: int) -> dict[str, int]:
    """The conditional charge of a write that adds ``entries`` and ``stored_bytes``: that
    usage, and the bounds the codex's usage must be within before it (``store.charge``'s
    arguments but the codex). An update adds no entry and is not held to the entry quota:
    its bound is then one no count reaches."""
    max_entries: int = settings.CODEX_QUOTA_ENTRIES
    max_bytes: int = settings.CODEX_QUOTA_STORED_BYTES
    return {
        "entries": entries,
        "stored_bytes": stored_bytes,
        "stored_upto": max_bytes - stored_bytes,
        "entries_upto": max_entries - entries if entries else _NO_BOUND,
    }


def charge(*, codex: Codex, entries: int, stored_bytes: int) -> int:
    """Add ``entries`` and ``stored_bytes`` to the codex's usage, or raise
    ``ResourceExhausted`` (and change nothing) if that would pass a quota.

    Returns the write's number in the codex (``Codex.last_write_seq``, raised by one): the
    caller stores it as the entry's ``write_seq``. The UPDATE holds the codex row's lock to
    the end of the transaction, so the numbers follow the order the writes commit in.

    Call it inside the transaction of the write it counts. (On PostgreSQL the fast path's
    save and update make this charge inside their one statement, ``notebook.sql.writes``,
    and call ``refuse`` when it was refused.)"""
    # One conditional UPDATE (notebook.store.charge).
    charged = store.charge(codex_id=codex.pk, **bounds(entries=entries, stored_bytes=stored_bytes))
    if charged is None:
        refuse(codex=codex, entries=entries, stored_bytes=stored_bytes)
    return charged


def refuse(*, codex: Codex, entries: int, stored_bytes: int) -> NoReturn:
    """Raise the ``ResourceExhausted`` of a charge its bounds refused, saying which quota it
    would pass (read from the codex's usage now)."""
    max_entries: int = settings.CODEX_QUOTA_ENTRIES
    max_bytes: int = settings.CODEX_QUOTA_STORED_BYTES
    usage = Codex.objects.filter(pk=codex.pk).values("entry_count", "stored_bytes").first()
    if usage is None:
        raise Internal("The codex disappeared during the write")
    if entries and usage["entry_count"] + entries > max_entries:
        codex_metrics.limit_refused("entries")
        raise ResourceExhausted(
            f"This codex holds {usage['entry_count']:,} entries, its quota of {max_entries:,} entries "
            "(CODEX_QUOTA_ENTRIES). A new entry can be saved only after the operator raises the quota; "
            "retrying will not help before then. Existing entries can still be read and updated."
        )
    codex_metrics.limit_refused("stored_bytes")
    raise ResourceExhausted(
        f"This codex stores {usage['stored_bytes']:,} bytes; this write of {stored_bytes:,} bytes would pass "
        f"its quota of {max_bytes:,} bytes (CODEX_QUOTA_STORED_BYTES; every revision counts). Retrying will "
        "not help until the operator raises the quota."
    )


def usage_totals() -> tuple[int, int, int]:
    """(codexes, entries, stored bytes) over every codex, from the kept counters: one
    aggregate over the codex table (a row per person), never a count of entries."""
    totals = Codex.objects.aggregate(codexes=Count("pk"), entries=Sum("entry_count"), stored=Sum("stored_bytes"))
    return totals["codexes"], totals["entries"] or 0, totals["stored"] or 0
