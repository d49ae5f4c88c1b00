"""The plain Django ORM versions of the statements on the hot path (``CODEX_FAST_PATH=0``).

Each function here gives what its fast twin in ``notebook.sql`` gives, with querysets
compiled per call: ``notebook.store`` picks one or the other, and the equivalence tests
(tests/test_fast_path_equivalence.py) hold the two to the same answers. The search's
candidates are also where the person's newest-first pages get theirs
(``selectors._recent_candidates``), so the search's filters are written once as a queryset.
"""

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection, transaction
from django.db.models import BigIntegerField, BooleanField, Exists, F, Model, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, StrIndex, Substr
from django.db.models.lookups import GreaterThan

from notebook.limits import EXCERPT_CHARS
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.prefilters import (
    LIKE,
    NEVER_READ,
    ON_THE_ROW,
    PG_BITMAP_ONLY_RESTORE,
    PG_BITMAP_ONLY_SAVE,
    PG_BITMAP_ONLY_SET,
    PG_TRIGRAM_KEYS,
    SEARCH_COLUMNS,
    SQLITE_TRIGRAM_MATCH,
    SQLITE_TRIGRAM_MATCH_AFTER,
    TRIGRAM,
    sqlite_trigram_params,
    tested_on_the_row,
)
from notebook.writers import APPLICATION


def entry_by_id(codex_id: int, entry_id: uuid.UUID, *, lock: bool = False) -> Entry | None:
    entries = Entry.objects.select_for_update() if lock else Entry.objects
    return entries.filter(codex_id=codex_id, pk=entry_id).first()


def insert_entry(entry: Entry) -> None:
    entry.save(force_insert=True)


def insert_rows(model: type[Model], rows: Sequence[Mapping[str, Any]]) -> None:
    if rows:
        model.objects.bulk_create([model(**row) for row in rows])


def update_entry(entry: Entry) -> int:
    """Every field but the keys, in an UPDATE that names the codex."""
    values = {
        field.attname: getattr(entry, field.attname)
        for field in Entry._meta.concrete_fields
        if field.attname not in ("id", "codex_id")
    }
    return Entry.objects.filter(codex_id=entry.codex_id, pk=entry.pk).update(**values)


def charge(*, codex_id: int, entries: int, stored_bytes: int, stored_upto: int, entries_upto: int) -> int | None:
    """``notebook.sql.usage.ChargeUsage.charge`` as an update and a read of the new number
    (the update holds the codex row's lock, so the read sees this write's number)."""
    charged = Codex.objects.filter(pk=codex_id, stored_bytes__lte=stored_upto, entry_count__lte=entries_upto).update(
        entry_count=F("entry_count") + entries,
        stored_bytes=F("stored_bytes") + stored_bytes,
        last_write_seq=F("last_write_seq") + 1,
    )
    if not charged:
        return None
    return Codex.objects.filter(pk=codex_id).values_list("last_write_seq", flat=True).get()


def candidates(
    codex_id: int,
    *,
    after: uuid.UUID | None = None,
    upto: uuid.UUID | None = None,
    tag: str | None = None,
    agent: str | None = None,
    written_by: str | None = None,
    query: str = "",
    prefilter: str | None = None,
    search_columns: bool = False,
) -> tuple[QuerySet[Entry], str]:
    """A codex's entries with the search's filters (see ``search_candidates``), not yet
    ordered, and the column that orders them in id order (a tag's or agent's index walks
    its own entry column)."""
    # The codex id typed bigint, like the column. (Migration 0002's trigram indexes, which 0009
    # replaced, led with the codex column through btree_gin, which has no bigint = integer.)
    found = Entry.objects.filter(codex_id=Cast(Value(codex_id), BigIntegerField()))
    # SQLite's trigram lookup bounds its own ids by the cursor (``SQLITE_TRIGRAM_MATCH_AFTER``).
    sqlite_trigram = prefilter == TRIGRAM and connection.vendor == "sqlite"
    if after is not None and not sqlite_trigram:
        found = found.filter(id__gt=after)
    if upto is not None:
        found = found.filter(id__lte=upto)
    order = "id"
    on_the_row = tested_on_the_row(connection.vendor, prefilter)
    for relation, value, name in [("related_agent_rows", agent, "agent"), ("tag_rows", tag, "tag")]:
        if value is not None and on_the_row:
            # PostgreSQL's trigram step: the entry's own list, as ``tested_on_the_row`` says.
            found = found.filter(**{f"{ON_THE_ROW[name]}__contains": [value]})
        elif value is not None:
            # Each index row bounded on its own codex and entry columns, in one join.
            bounds = {f"{relation}__codex_id": codex_id, f"{relation}__value": value}
            if after is not None:
                bounds[f"{relation}__entry_id__gt"] = after
            if upto is not None:
                bounds[f"{relation}__entry_id__lte"] = upto
            found = found.filter(**bounds)
            order = f"{relation}__entry_id"
    if written_by is not None:
        revisions = EntryRevision.objects.filter(writer_kind=APPLICATION, writer_client_id=written_by)
        found = found.filter(Exists(revisions.filter(codex_id=codex_id, entry=OuterRef("pk"))))
    if sqlite_trigram and after is not None:
        bound = Entry._meta.pk.get_db_prep_value(after, connection)
        found = found.filter(id__in=RawSQL(SQLITE_TRIGRAM_MATCH_AFTER, sqlite_trigram_params(codex_id, query, bound)))
    elif sqlite_trigram:
        found = found.filter(id__in=RawSQL(SQLITE_TRIGRAM_MATCH, sqlite_trigram_params(codex_id, query)))
    elif prefilter == LIKE:
        # INSTR (PostgreSQL: STRPOS), as the fast path tests a substring along the walk.
        found = found.filter(
            GreaterThan(StrIndex("search_title", Value(query)), 0)
            | GreaterThan(StrIndex("search_content", Value(query)), 0)
            | GreaterThan(StrIndex("search_tags_text", Value(query)), 0)
        )
    elif prefilter is not None:
        # PostgreSQL's trigram step: the codex's trigram keys (migration 0009's index), then
        # the substring by ``contains`` (Django escapes %, _ and \ in it).
        table = connection.ops.quote_name(Entry._meta.db_table)
        keys = RawSQL(PG_TRIGRAM_KEYS.format(table=table), [codex_id, query], output_field=BooleanField())
        found = found.filter(keys).filter(
            Q(search_title__contains=query) | Q(search_content__contains=query) | Q(search_tags_text__contains=query)
        )
    deferred = list(NEVER_READ)
    if not search_columns:
        deferred += SEARCH_COLUMNS
    return found.defer(*deferred).annotate(excerpt=Substr("content", 1, EXCERPT_CHARS)), order


def search_candidates(codex_id: int, *, limit: int, bitmap_only: bool = False, **filters: Any) -> list[Entry]:
    """``notebook.sql.search.SearchStatements.candidates`` as a queryset: the first ``limit``
    entries of the codex in id order after ``after``, up to ``upto``, with ``tag``, ``agent``
    and a revision written by ``written_by``, narrowed by ``query`` as ``prefilter`` says;
    ``bitmap_only`` (PostgreSQL): planned with ``prefilters.PG_BITMAP_ONLY``."""
    found, order = candidates(codex_id, **filters)
    if not bitmap_only:
        return list(found.order_by(order)[:limit])
    # The fast path's statements one by one, in a transaction of our own (set_config(...,
    # true) lasts to its end) or the caller's, which the restoring leaves as it was (an error
    # rolls the savepoint back, and the settings with it).
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(PG_BITMAP_ONLY_SAVE)
        cursor.execute(PG_BITMAP_ONLY_SET)
        rows = list(found.order_by(order)[:limit])
        cursor.execute(PG_BITMAP_ONLY_RESTORE)
    return rows


def search_window_end(
    codex_id: int, *, offset: int, after: uuid.UUID | None = None, tag: str | None = None, agent: str | None = None
) -> uuid.UUID | None:
    """``SearchStatements.window_end`` as a queryset: the id ``offset`` places after ``after``
    (by tag, or else by agent, read from that index alone), or None when none follows it."""
    rows: QuerySet[Any] = Entry.objects.filter(codex_id=codex_id)
    column = "id"
    for model, value in [(EntryTag, tag), (EntryRelatedAgent, agent)]:
        if value is not None:
            rows = model.objects.filter(codex_id=codex_id, value=value)
            column = "entry_id"
            break
    if after is not None:
        rows = rows.filter(**{f"{column}__gt": after})
    ends = list(rows.order_by(column).values_list(column, flat=True)[offset : offset + 2])
    return ends[0] if len(ends) == 2 else None
