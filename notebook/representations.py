"""The wire shapes of contract section 4: Entry, EntrySummary and a search page."""

import datetime as dt
from typing import Any

from notebook.limits import EXCERPT_CHARS
from notebook.models import Entry
from notebook.selectors import SearchPage


def rfc3339_ms(moment: dt.datetime) -> str:
    """RFC 3339 in UTC with millisecond precision, e.g. 2026-11-30T12:34:56.789Z."""
    if moment.tzinfo is not dt.UTC:  # the database layers give UTC already: nothing to convert
        moment = moment.astimezone(dt.UTC)
    if moment.year >= 1000:
        # A search page writes up to forty of these: printf-style formatting of the fields costs
        # less than an f-string's, isoformat with its timespec or strftime.
        return "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ" % (  # noqa: UP031
            moment.year,
            moment.month,
            moment.day,
            moment.hour,
            moment.minute,
            moment.second,
            moment.microsecond // 1000,
        )
    # strftime writes years before 1000 unpadded; kept as it was.
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _common(entry: Entry) -> dict[str, Any]:
    data: dict[str, Any] = {"id": str(entry.id), "revision": entry.revision}
    if entry.title is not None:
        data["title"] = entry.title
    return data


def _times(entry: Entry, data: dict[str, Any]) -> None:
    created = rfc3339_ms(entry.created_at)
    data["createdAt"] = created
    # An entry never updated was written at one moment: its text is written once.
    data["updatedAt"] = created if entry.updated_at == entry.created_at else rfc3339_ms(entry.updated_at)


def entry_dict(entry: Entry) -> dict[str, Any]:
    data = _common(entry)
    data["content"] = entry.content
    data["tags"] = list(entry.tags)
    data["relatedAgentIds"] = list(entry.related_agent_ids)
    if entry.provenance is not None:
        data["provenance"] = entry.provenance
    _times(entry, data)
    return data


def entry_summary_dict(entry: Entry) -> dict[str, Any]:
    data = _common(entry)
    data["tags"] = list(entry.tags)
    data["relatedAgentIds"] = list(entry.related_agent_ids)
    _times(entry, data)
    excerpt = getattr(entry, "excerpt", None)
    data["excerpt"] = excerpt if excerpt is not None else entry.content[:EXCERPT_CHARS]
    data["contentBytes"] = entry.content_bytes
    return data


def search_page_dict(page: SearchPage) -> dict[str, Any]:
    data: dict[str, Any] = {"entries": [entry_summary_dict(entry) for entry in page.entries]}
    if page.next_cursor is not None:
        data["nextCursor"] = page.next_cursor
    data["coverage"] = {
        "storage": "active-only",
        "mode": "literal-substring-v1",
        "scanned": page.scanned,
        "hasMore": page.has_more,
    }
    return data
