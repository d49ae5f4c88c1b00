"""An entry's revision history as a person reads it: each snapshot, and what changed between
two of them field by field (title, content, tags, related agents, provenance), with the
changed words marked. Everything here is plain text in pieces; the templates escape it.

Words are compared with ``difflib``: first line by line, then word by word inside the lines
that changed, so that a one-word edit in a long note costs a few small comparisons instead of
one over every word of the note. A changed block of more than ``WORD_DIFF_MAX_TOKENS`` words
and spaces is shown as removed and added whole (``SequenceMatcher`` is quadratic at worst).
"""

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any

from notebook.models import Entry, EntryRevision

SAME, DELETED, INSERTED, GAP = "same", "del", "ins", "gap"
# One change: its kind and its text. Joining the SAME and DELETED texts gives the old value
# back exactly, the SAME and INSERTED texts the new one (before ``shorten``).
Change = tuple[str, str]

WORD_DIFF_MAX_TOKENS = 4_000
# Unchanged text longer than this is shortened to its ends around the changes.
LONGEST_UNCHANGED = 400
KEPT_AROUND_CHANGES = 150

_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_NO_WORD = re.compile(r"[\W_]*")


@dataclass(frozen=True)
class Snapshot:
    """The fields of one revision that a person compares."""

    content: str
    title: str | None
    tags: list[str]
    related_agent_ids: list[str]
    provenance: dict[str, Any] | None

    @classmethod
    def of(cls, revision: EntryRevision) -> "Snapshot":
        return cls(revision.content, revision.title, revision.tags, revision.related_agent_ids, revision.provenance)


@dataclass(frozen=True)
class FieldChange:
    label: str
    changes: list[Change]
    items: bool = False  # a list of values (tags, agents), each change one whole value
    note: str = ""  # "added" or "removed" when the field was absent on one side


@dataclass(frozen=True)
class HistoryItem:
    revision: EntryRevision
    diff: list[FieldChange]  # from the previous revision; empty for revision 1 or no change


def _merged(changes: list[Change]) -> list[Change]:
    merged: list[Change] = []
    for kind, text in changes:
        if not text:
            continue
        if merged and merged[-1][0] == kind:
            merged[-1] = (kind, merged[-1][1] + text)
        else:
            merged.append((kind, text))
    return merged


def _tokens_changes(old: list[str], new: list[str]) -> list[Change]:
    """Word changes; spaces and punctuation kept between two changes join them, so that a
    rewritten phrase reads as one removal and one addition, not as words cut apart at every
    space they happen to share."""
    opcodes = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    changes: list[Change] = []
    removed, added = "", ""
    for index, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        kept = "".join(old[i1:i2])
        between_changes = 0 < index < len(opcodes) - 1
        if tag == "equal" and not (between_changes and _NO_WORD.fullmatch(kept)):
            changes += [(DELETED, removed), (INSERTED, added), (SAME, kept)]
            removed, added = "", ""
        else:
            removed += "".join(old[i1:i2])
            added += "".join(new[j1:j2])
    return [*changes, (DELETED, removed), (INSERTED, added)]


def word_changes(old: str, new: str) -> list[Change]:
    """The words (and the spaces between them) removed, added and kept from ``old`` to ``new``."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    changes: list[Change] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        before, after = "".join(old_lines[i1:i2]), "".join(new_lines[j1:j2])
        if tag == "equal":
            changes.append((SAME, before))
            continue
        old_tokens, new_tokens = _TOKEN.findall(before), _TOKEN.findall(after)
        if len(old_tokens) + len(new_tokens) > WORD_DIFF_MAX_TOKENS:
            changes += [(DELETED, before), (INSERTED, after)]
        else:
            changes += _tokens_changes(old_tokens, new_tokens)
    return _merged(changes)


def shorten(changes: list[Change]) -> list[Change]:
    """Long unchanged stretches cut to their ends next to a change, with a gap saying how much."""
    shortened: list[Change] = []
    for index, (kind, text) in enumerate(changes):
        if kind != SAME or len(text) <= LONGEST_UNCHANGED:
            shortened.append((kind, text))
            continue
        head = text[:KEPT_AROUND_CHANGES] if index > 0 else ""
        tail = text[-KEPT_AROUND_CHANGES:] if index < len(changes) - 1 else ""
        hidden = len(text) - len(head) - len(tail)
        shortened += [(SAME, head), (GAP, f"{hidden:,} unchanged characters"), (SAME, tail)]
    return [(kind, text) for kind, text in shortened if text]


def _items_changes(old: list[str], new: list[str]) -> list[Change]:
    changes: list[Change] = []
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            changes += [(SAME, item) for item in old[i1:i2]]
        else:
            changes += [(DELETED, item) for item in old[i1:i2]] + [(INSERTED, item) for item in new[j1:j2]]
    return changes


def _optional(label: str, old: str | None, new: str | None) -> FieldChange | None:
    if old == new:
        return None
    if old is None:
        return FieldChange(label, [(INSERTED, new or "")], note="added")
    if new is None:
        return FieldChange(label, [(DELETED, old)], note="removed")
    return FieldChange(label, shorten(word_changes(old, new)))


def _pretty(provenance: dict[str, Any] | None) -> str | None:
    return None if provenance is None else json.dumps(provenance, indent=2, ensure_ascii=False, sort_keys=True)


def field_changes(older: Snapshot, newer: Snapshot) -> list[FieldChange]:
    """What changed from ``older`` to ``newer``, one item per changed field, in reading order."""
    fields: list[FieldChange | None] = [_optional("Title", older.title, newer.title)]
    if older.content != newer.content:
        fields.append(FieldChange("Content", shorten(word_changes(older.content, newer.content))))
    for label, old, new in (
        ("Tags", older.tags, newer.tags),
        ("Related agents", older.related_agent_ids, newer.related_agent_ids),
    ):
        if old != new:
            fields.append(FieldChange(label, _items_changes(old, new), items=True))
    fields.append(_optional("Provenance", _pretty(older.provenance), _pretty(newer.provenance)))
    return [field for field in fields if field is not None]


def entry_history(entry: Entry) -> list[HistoryItem]:
    """Every snapshot of ``entry``, newest first, each with what changed from the one before."""
    # By codex and entry, as every notebook statement names its codex (docs/capacity.md).
    revisions = list(EntryRevision.objects.filter(codex_id=entry.codex_id, entry=entry).order_by("revision"))
    items = []
    for index, revision in enumerate(revisions):
        diff = field_changes(Snapshot.of(revisions[index - 1]), Snapshot.of(revision)) if index else []
        items.append(HistoryItem(revision, diff))
    return items[::-1]


def compare(entry: Entry, older: int, newer: int) -> list[FieldChange] | None:
    """What changed between two revisions of ``entry``, or None if either does not exist."""
    revisions = EntryRevision.objects.filter(codex_id=entry.codex_id, entry=entry, revision__in=[older, newer])
    found = {revision.revision: revision for revision in revisions}
    if older not in found or newer not in found:
        return None
    return field_changes(Snapshot.of(found[older]), Snapshot.of(found[newer]))
