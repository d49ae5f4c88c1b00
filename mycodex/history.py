"""An entry's revision history as text a person can read: each snapshot, and what changed
between two of them as a unified diff (difflib). Everything here is plain text; the
templates escape it."""

import difflib
import json
from dataclasses import dataclass

from notebook.models import Entry, EntryRevision


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add", "del", "hunk" or "" (context / file header)
    text: str


@dataclass(frozen=True)
class HistoryItem:
    revision: EntryRevision
    diff: list[DiffLine]  # from the previous revision; empty for revision 1


def snapshot_text(revision: EntryRevision) -> list[str]:
    """One revision as lines: the metadata first, then the content exactly."""
    lines = [
        f"title: {revision.title if revision.title is not None else '(none)'}",
        "tags: " + (", ".join(revision.tags) or "(none)"),
        "related agents: " + (", ".join(revision.related_agent_ids) or "(none)"),
        "provenance: "
        + (
            json.dumps(revision.provenance, ensure_ascii=False, sort_keys=True)
            if revision.provenance is not None
            else "(none)"
        ),
        "",
    ]
    return lines + revision.content.splitlines()


def diff_lines(older: EntryRevision, newer: EntryRevision) -> list[DiffLine]:
    lines = difflib.unified_diff(
        snapshot_text(older),
        snapshot_text(newer),
        fromfile=f"revision {older.revision}",
        tofile=f"revision {newer.revision}",
        lineterm="",
    )
    out = []
    for line in lines:
        if line.startswith(("+++", "---")):
            kind = ""
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = ""
        out.append(DiffLine(kind, line))
    return out


def entry_history(entry: Entry) -> list[HistoryItem]:
    """Every snapshot of ``entry``, newest first, each with its diff from the one before."""
    revisions = list(EntryRevision.objects.filter(entry=entry).order_by("revision"))
    items = []
    for index, revision in enumerate(revisions):
        diff = diff_lines(revisions[index - 1], revision) if index else []
        items.append(HistoryItem(revision, diff))
    return items[::-1]


def compare(entry: Entry, older: int, newer: int) -> list[DiffLine] | None:
    """The diff between two revisions of ``entry``, or None if either does not exist."""
    found = {r.revision: r for r in EntryRevision.objects.filter(entry=entry, revision__in=[older, newer])}
    if older not in found or newer not in found:
        return None
    return diff_lines(found[older], found[newer])
