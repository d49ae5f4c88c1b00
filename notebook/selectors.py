"""Reads: get and search (contract 5)."""

import datetime as dt
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from django.core import signing
from django.db import connections, router
from django.db.models import Count, F, Q, QuerySet

from notebook import orm, search_plan, store
from notebook.exceptions import InvalidArgument, NotFound
from notebook.limits import CANDIDATES_PER_PAGE
from notebook.models import SEARCH_TAGS_SEPARATOR, Codex, Entry, EntryRevision
from notebook.prefilters import LIKE, TRIGRAM
from notebook.validation import SearchParams, canonical_json, normalize_for_search
from notebook.writers import APPLICATION

# One message for "missing" and "someone else's", so the answer reveals nothing.
NOT_FOUND_MESSAGE = "no entry with this id exists in your codex"

# Trigram indexes (migration 0002) serve queries of at least this many characters.
TRIGRAM_MIN_CHARS = 3
_CURSOR_SALT = "notebook.search.cursor.v1"
_BAD_CURSOR = (
    "cursor is not valid for this search: it was altered, comes from another codex, "
    "or was issued for different query/tag/relatedAgentId filters"
)


@dataclass(frozen=True)
class SearchPage:
    entries: list[Entry]
    next_cursor: str | None
    scanned: int
    has_more: bool


# Made before the token check, which reads the entry in its own statement (``store``).
EntryReadAhead = store.EntryReadAhead
entry_read_ahead = store.entry_read_ahead


def entry_get(*, codex: Codex, entry_id: uuid.UUID, ahead: EntryReadAhead | None = None) -> Entry:
    """The entry with full content, or ``not_found`` if it is missing or in another codex.
    ``ahead``: the entry as the token check read it, if it did."""
    answered, entry = ahead.entry_for(codex.pk, entry_id) if ahead is not None else (False, None)
    if not answered:
        entry = store.entry_by_id(codex.pk, entry_id)
    if entry is None:
        raise NotFound(NOT_FOUND_MESSAGE)
    return entry


def _cursor_binding(codex: Codex, params: SearchParams) -> str:
    """Ties a cursor to its codex and filters without revealing either."""
    filters = [codex.pk, params.query, params.tag, params.related_agent_id]
    if params.written_by is not None:  # only the person's pages set it; tool cursors stay as they were
        filters.append(params.written_by)
    bound = canonical_json(filters)
    return hashlib.sha256(bound.encode("utf-8")).hexdigest()[:32]


def _encode_cursor(codex: Codex, params: SearchParams, after: uuid.UUID) -> str:
    return signing.dumps({"a": str(after), "b": _cursor_binding(codex, params)}, salt=_CURSOR_SALT)


def _cursor_payload(codex: Codex, params: SearchParams, salt: str) -> dict:
    """The signed payload of ``params.cursor``, checked to be bound to this codex and these filters."""
    try:
        payload = signing.loads(params.cursor, salt=salt)
    except signing.BadSignature:
        raise InvalidArgument(_BAD_CURSOR) from None
    # A valid signature means we wrote this payload; still, check its shape.
    if not isinstance(payload, dict) or payload.get("b") != _cursor_binding(codex, params):
        raise InvalidArgument(_BAD_CURSOR)
    return payload


def _decode_cursor(codex: Codex, params: SearchParams) -> uuid.UUID | None:
    if params.cursor is None:
        return None
    payload = _cursor_payload(codex, params, _CURSOR_SALT)
    try:
        return uuid.UUID(payload["a"])
    except (KeyError, TypeError, ValueError):
        raise InvalidArgument(_BAD_CURSOR) from None


def _matches(entry: Entry, normalized_query: str) -> bool:
    """A literal substring of one field or one tag; never across two (contract 5)."""
    return (
        normalized_query in entry.search_title
        or normalized_query in entry.search_content
        or any(normalized_query in tag for tag in entry.search_tags)
    )


def _uses_trigram(normalized_query: str) -> bool:
    """Whether the (normalized) query narrows candidates by trigram index.

    U+0000 cannot be sent to PostgreSQL (nor stored in any searched field); such a
    query keeps the plain scan, which finds nothing, correctly.
    """
    return len(normalized_query) >= TRIGRAM_MIN_CHARS and "\x00" not in normalized_query


def _narrowed_exactly(normalized_query: str) -> bool:
    """Whether the candidates the indexes give for this query all match it, so that the
    page needs neither the search columns (the whole normalized content, for one) nor
    ``_matches``.

    They do when the query narrows by index at all (three characters or more) and does not
    hold the tags' separator: each test (SQLite's INSTR or trigram phrase, PostgreSQL's LIKE)
    is then for a substring of one column, and a substring of the tags' joined text without
    the separator lies within one tag. (Were a LIKE to fold ASCII case, as SQLite's does, it
    would change nothing: normalized text never holds an ASCII capital, NFKC then casefold.)
    """
    return _uses_trigram(normalized_query) and SEARCH_TAGS_SEPARATOR not in normalized_query


def _recent_candidates(codex: Codex, params: SearchParams) -> QuerySet[Entry]:
    """``entry_recent``'s candidates, narrowed by the indexes as the search's are (a
    superset of the matches when there is a query): the search's filters as a queryset
    (``notebook.orm.candidates``, the plain path's own), since only the person's pages read
    newest first."""
    normalized_query = normalize_for_search(params.query)
    narrowed = _uses_trigram(normalized_query)
    candidates, _ = orm.candidates(
        codex.pk,
        tag=params.tag,
        agent=params.related_agent_id,
        written_by=params.written_by,
        query=normalized_query if narrowed else "",
        prefilter=TRIGRAM if narrowed else None,
        search_columns=bool(params.query),
    )
    return candidates


def _fetch_candidates(
    codex: Codex, params: SearchParams, normalized_query: str, after: uuid.UUID | None, count: int
) -> list[Entry]:
    """The page's first ``count`` candidates after the cursor ``after``, in id order,
    narrowed by the indexes (``notebook.store.search_candidates``).

    The tag and related-agent filters are exact; a query of at least three
    characters narrows by trigram (exact, unless the query spans two tags: see
    ``_narrowed_exactly``; then ``_matches`` re-checks each candidate). A shorter
    query has no trigram, so its candidates stay the codex's entries. Which plan
    serves a cursor never changes, since the cursor is bound to the filters.

    A query's candidates come from a plan (``notebook.search_plan``): first a sample, the
    next ``search_plan.sample_size`` entries in id order (by tag or agent, if given, counted;
    otherwise estimated from the codex's entry count), each tested for the substring, which
    fills the page at once for a word common in this codex. If it does not, what it found
    says how common the word is here, and the rest of the page comes from whichever is
    cheaper for that density: walking on (a stretch sized to fill the page, the index giving
    whatever that stretch still leaves out), or the trigram index. Neither the index nor
    PostgreSQL's planner knows how often a word occurs in one codex: SQLite's FTS5 lookup
    collects every match of a word before a page takes 21 of them, and PostgreSQL's planner,
    judging by the whole table, would walk a codex to its end for a word common in other
    codexes but rare in this one. The walk's test (INSTR or STRPOS) is one no index serves,
    and on PostgreSQL the index step disables index scans (which would walk) for its one
    statement.
    """
    filters: dict[str, Any] = {
        "tag": params.tag,
        "agent": params.related_agent_id,
        "written_by": params.written_by,
        # Only _matches reads the search columns (the tag/agent filters are in SQL).
        "search_columns": bool(params.query) and not _narrowed_exactly(normalized_query),
    }
    if not _uses_trigram(normalized_query):
        return store.search_candidates(codex.pk, **filters, after=after, limit=count)
    filters["query"] = normalized_query
    entries = codex.entry_count
    sample = search_plan.sample_size(entries, count)
    sample_end = _window_end(codex, params, after, sample)
    rows = store.search_candidates(codex.pk, **filters, after=after, upto=sample_end, prefilter=LIKE, limit=count)
    if len(rows) == count or sample_end is None:
        return rows
    start = sample_end
    walk = search_plan.walk_window(found=len(rows), needed=count - len(rows), sample=sample, entries=entries)
    if walk is not None:
        window_end = _window_end(codex, params, start, walk)
        rest = count - len(rows)
        rows += store.search_candidates(codex.pk, **filters, after=start, upto=window_end, prefilter=LIKE, limit=rest)
        if len(rows) == count or window_end is None:
            return rows
        start = window_end
    return rows + _indexed_candidates(codex, filters, start, count - len(rows))


def _window_end(codex: Codex, params: SearchParams, after: uuid.UUID | None, entries: int) -> uuid.UUID | None:
    """Where a walk of the next ``entries`` entries after ``after`` ends (by tag or agent,
    counted in that index; otherwise estimated), or None when it may as well cover the rest.
    A walk of no entries ends where it starts."""
    if entries <= 0:
        return after if after is not None else uuid.UUID(int=0)
    if params.tag is None and params.related_agent_id is None:
        return _estimated_window_end(codex, after, entries)
    return store.search_window_end(
        codex.pk, after=after, tag=params.tag, agent=params.related_agent_id, offset=entries - 1
    )


def _indexed_candidates(codex: Codex, filters: dict[str, Any], after: uuid.UUID, count: int) -> list[Entry]:
    """The first ``count`` candidates after ``after`` by the trigram index alone (on
    PostgreSQL with the planner left nothing but its bitmap: ``prefilters.PG_BITMAP_ONLY``)."""
    bitmap_only = connections[router.db_for_read(Entry)].vendor == "postgresql"
    return store.search_candidates(
        codex.pk, **filters, after=after, prefilter=TRIGRAM, limit=count, bitmap_only=bitmap_only
    )


_ID_SPACE = 2**128


def _estimated_window_end(codex: Codex, after: uuid.UUID | None, entries: int) -> uuid.UUID | None:
    """Where the next ``entries`` entries of the codex after ``after`` end, estimated without
    a statement; None when the walk may as well cover the rest.

    Entry ids are random (``uuid4``), spread evenly over the id space, so that many entries
    span about ``entries / entry_count`` of it (give or take a few per cent). A window only
    divides the work between the walk and the trigram index: any end gives the same
    candidates in the same order, since the walk takes the candidates up to it and the index
    those after it. Counting the entries instead (``store.search_window_end``, still used
    with a tag or agent, whose counts are not kept) would walk that many index entries.
    """
    count = codex.entry_count
    if count <= entries:
        return None
    end = (after.int if after is not None else 0) + _ID_SPACE * entries // count
    return uuid.UUID(int=end) if end < _ID_SPACE else None


def entry_search(*, codex: Codex, params: SearchParams) -> SearchPage:
    """One page of a search in ascending id order (contract 5).

    Unfiltered: the next ``limit`` entries. Filtered: at most 100 candidates are
    examined, stopping once ``limit`` match; the cursor continues right after the
    last one examined, so following cursors to the end yields every entry that
    matched throughout, exactly once. Candidates are narrowed by the indexes
    (``_fetch_candidates``), so a rare tag, agent or word is listed in full on one page.
    """
    after = _decode_cursor(codex, params)

    normalized_query = normalize_for_search(params.query)
    if not params.filtered:
        rows = _fetch_candidates(codex, params, normalized_query, after, params.limit + 1)
        entries = rows[: params.limit]
        next_after = entries[-1].id if entries else None
        return _page(codex, params, entries, scanned=len(entries), has_more=len(rows) > params.limit, last=next_after)

    entries: list[Entry] = []
    scanned = 0
    last = after
    check = bool(params.query) and not _narrowed_exactly(normalized_query)
    # Indexed candidates nearly always match, so the first fetch asks for just enough
    # for a full page (plus one, to learn whether more remain); only when some fail the
    # exact check does a second fetch bring the rest of the page's 100 candidates.
    size = min(params.limit, CANDIDATES_PER_PAGE)
    while True:
        rows = _fetch_candidates(codex, params, normalized_query, last, size + 1)
        examined = 0
        for candidate in rows[:size]:
            examined += 1
            last = candidate.id
            if not check or _matches(candidate, normalized_query):
                entries.append(candidate)
                if len(entries) == params.limit:
                    break
        scanned += examined
        has_more = len(rows) > examined
        if not has_more or len(entries) == params.limit or scanned == CANDIDATES_PER_PAGE:
            return _page(codex, params, entries, scanned=scanned, has_more=has_more, last=last)
        size = CANDIDATES_PER_PAGE - scanned


def _page(
    codex: Codex, params: SearchParams, entries: list[Entry], *, scanned: int, has_more: bool, last: uuid.UUID | None
) -> SearchPage:
    """The page, with a cursor continuing right after ``last`` when more remain."""
    next_cursor = _encode_cursor(codex, params, last) if has_more and last is not None else None
    return SearchPage(entries=entries, next_cursor=next_cursor, scanned=scanned, has_more=has_more)


# --- Newest first, for the person's own pages (contract 9) -------------------------------
# The tools page in id order; a person wants the latest notes first. Same candidates, same
# matching, same filters; keyset paging on (updated_at, write_seq) with a cursor of its own
# salt. ``write_seq`` is unique in a codex and follows the write order, so writes of one
# millisecond keep the order they were made in.

_RECENT_CURSOR_SALT = "notebook.recent.cursor.v1"


@dataclass(frozen=True)
class RecentPage:
    entries: list[Entry]
    next_cursor: str | None
    scanned: int


def _decode_recent_cursor(codex: Codex, params: SearchParams) -> tuple[dt.datetime, int] | None:
    if params.cursor is None:
        return None
    payload = _cursor_payload(codex, params, _RECENT_CURSOR_SALT)
    try:
        return dt.datetime.fromisoformat(payload["u"]), int(payload["s"])
    except (KeyError, TypeError, ValueError):
        raise InvalidArgument(_BAD_CURSOR) from None


def entry_recent(*, codex: Codex, params: SearchParams, max_scanned: int = 10 * CANDIDATES_PER_PAGE) -> RecentPage:
    """One page of the codex newest first (``updated_at`` descending, then the write order).

    Filters and matching are the search tool's (same candidates, same ``_matches``).
    Candidates are examined in batches of 100 until ``params.limit`` match or about
    ``max_scanned`` were examined; ``next_cursor`` continues right after the last one
    examined, so following it to the end visits every entry that matched throughout once.
    """
    after = _decode_recent_cursor(codex, params)
    normalized_query = normalize_for_search(params.query)
    newest_first = _recent_candidates(codex, params).order_by("-updated_at", "-write_seq")
    entries: list[Entry] = []
    scanned = 0
    last: Entry | None = None
    more = False
    while len(entries) < params.limit and scanned < max_scanned:
        candidates = newest_first
        if after is not None:
            moment, last_seq = after
            candidates = candidates.filter(Q(updated_at__lt=moment) | Q(updated_at=moment, write_seq__lt=last_seq))
        batch = list(candidates[: CANDIDATES_PER_PAGE + 1])
        position = -1  # index in ``batch`` of the last candidate examined
        for index, candidate in enumerate(batch[:CANDIDATES_PER_PAGE]):
            position = index
            scanned += 1
            last = candidate
            if not params.query or _matches(candidate, normalized_query):
                entries.append(candidate)
                if len(entries) == params.limit:
                    break
        # More remain when the batch holds a candidate after the last one examined.
        more = len(batch) > position + 1
        if not more or last is None:
            break
        after = (last.updated_at, last.write_seq)
    next_cursor = None
    if more and last is not None:
        payload = {"u": last.updated_at.isoformat(), "s": last.write_seq, "b": _cursor_binding(codex, params)}
        next_cursor = signing.dumps(payload, salt=_RECENT_CURSOR_SALT)
    return RecentPage(entries=entries, next_cursor=next_cursor, scanned=scanned)


# --- Who wrote what, for the person's pages -------------------------------------------------
# An application "wrote" an entry when it wrote at least one of its revisions; it "created"
# it when it wrote revision 1, and "last changed" it when it wrote the current revision.
# Applications are matched by the client id frozen on the revision, so an application
# deleted since still has its notes; imported revisions never count (see notebook.writers).


def _written_by(client_id: str) -> QuerySet[EntryRevision]:
    return EntryRevision.objects.filter(writer_kind=APPLICATION, writer_client_id=client_id)


def _written_by_any(client_ids: list[str]) -> QuerySet[EntryRevision]:
    return EntryRevision.objects.filter(writer_kind=APPLICATION, writer_client_id__in=client_ids)


@dataclass(frozen=True)
class WriterCounts:
    wrote: int  # entries with at least one revision by the application
    created: int  # entries whose revision 1 it wrote
    last_changed: int  # entries whose current revision it wrote


def writer_counts(*, codex: Codex, client_ids: list[str]) -> dict[str, WriterCounts]:
    """Per client id, how many of the codex's entries the application wrote, created and
    last changed: one grouped query (served by the revisions' writer index) for any number
    of applications. Client ids that wrote nothing are absent."""
    rows = (
        _written_by_any(client_ids)
        .filter(codex=codex, entry__codex=codex)  # the joined entries named by their codex too
        .values("writer_client_id")
        .annotate(
            wrote=Count("entry", distinct=True),
            created=Count("pk", filter=Q(revision=1)),
            last_changed=Count("pk", filter=Q(revision=F("entry__revision"))),
        )
        .order_by()
    )
    return {row["writer_client_id"]: WriterCounts(row["wrote"], row["created"], row["last_changed"]) for row in rows}


@dataclass(frozen=True)
class EntryWriters:
    created_by: EntryRevision  # revision 1 (its ``writer``)
    last_changed_by: EntryRevision  # the current revision


def entry_writers(*, codex: Codex, entry_ids: list[uuid.UUID]) -> dict[uuid.UUID, EntryWriters]:
    """Who created and who last changed each of these entries of the codex, in one query
    (revision 1 and the current revision of each). Ids of other codexes are absent."""
    revisions = EntryRevision.objects.filter(codex=codex, entry__codex=codex, entry_id__in=entry_ids).filter(
        Q(revision=1) | Q(revision=F("entry__revision"))
    )
    first: dict[uuid.UUID, EntryRevision] = {}
    current: dict[uuid.UUID, EntryRevision] = {}
    # At most two rows per entry, in revision order: revision 1 first (an imported entry may
    # lack it; then its current revision stands in), the current one last.
    for revision in revisions.defer("content", "provenance").order_by("entry_id", "revision"):
        first.setdefault(revision.entry_id, revision)
        current[revision.entry_id] = revision
    return {entry_id: EntryWriters(first[entry_id], current[entry_id]) for entry_id in current}


def writer_name(*, codex: Codex, client_id: str) -> str | None:
    """The name an application had when it last wrote in this codex (None if it never did)."""
    return (
        _written_by(client_id)
        .filter(codex=codex)
        .order_by("-recorded_at", "-pk")
        .values_list("writer_name", flat=True)
        .first()
    )
