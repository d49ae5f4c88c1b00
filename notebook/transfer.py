"""A person's codex in and out as one JSON document (contract 9; format in docs/data.md).

Export streams: entries are read in keyset batches (by id, or newest first for the Markdown
file a person reads) with their revisions, and each entry is serialized as it is reached,
so memory stays flat for any codex size. Import is
validated entry by entry with the tools' own rules first, and written only if every entry
passed, in one transaction: all or nothing, with a report of what was refused and why.
"""

import datetime as dt
import hashlib
import json
import re
import uuid
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from common.inputs import JSONRefused, json_document, name_cleaned, name_problem, shown
from notebook import quotas
from notebook.exceptions import InvalidArgument, ResourceExhausted
from notebook.limits import (
    IMPORT_CLOCK_SKEW_SECONDS,
    IMPORT_EARLIEST_TIME,
    IMPORT_REPORT_TEXT_CHARS,
    MAX_SAFE_INTEGER,
    WRITER_FIELD_MAX_CHARS,
)
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.representations import entry_dict, rfc3339_ms
from notebook.services import apply_input
from notebook.transactions import write_transaction
from notebook.validation import EntryInput, parse_entry_id, parse_entry_input
from notebook.writers import IMPORT, IMPORT_WRITER, KINDS, UNKNOWN, Writer

EXPORT_FORMAT = "agent-codex-export"
# Version 2 added each snapshot's "writer"; version 1 files (without it) still import.
EXPORT_VERSION = 2
READABLE_VERSIONS = (1, 2)
EXPORT_BATCH = 500
# Refused entries listed in a report; the count is always exact.
REPORT_MAX_REFUSALS = 100

Progress = Callable[[int], None]


# A snapshot's members in the export, in the Entry's order, with the column each comes from.
_SNAPSHOT_COLUMNS = (
    ("title", "title"),
    ("content", "content"),
    ("tags", "tags"),
    ("relatedAgentIds", "related_agent_ids"),
    ("provenance", "provenance"),
)


def _revision_dict(revision: EntryRevision) -> dict[str, Any]:
    """A snapshot in the Entry's shape: ``title`` and ``provenance`` only when set (the
    list columns are never null), plus ``revision`` and ``recordedAt``."""
    data: dict[str, Any] = {"revision": revision.revision}
    for member, column in _SNAPSHOT_COLUMNS:
        value = getattr(revision, column)
        if value is not None:
            data[member] = value
    data["recordedAt"] = rfc3339_ms(revision.recorded_at)
    writer = revision.writer
    # Written as the import reads them (the name rule, which its writer fields are held to): a
    # name recorded before the rule held (an application registered with a U+202E in its name)
    # has each refused character written as U+FFFD, so that the person's own export imports.
    data["writer"] = {
        "kind": writer.kind,
        "clientId": name_cleaned(writer.client_id),
        "name": name_cleaned(writer.name),
        "scopes": name_cleaned(writer.scopes),
    }
    return data


def export_entries(*, codex: Codex, batch_size: int = EXPORT_BATCH) -> Iterator[dict[str, Any]]:
    """Every entry of the codex as its export object (the tool's Entry plus ``revisions``,
    oldest first), in id order, reading ``batch_size`` entries per query."""
    after: uuid.UUID | None = None
    while True:
        page = Entry.objects.filter(codex=codex).order_by("id")
        if after is not None:
            page = page.filter(id__gt=after)
        batch = list(page[:batch_size])
        if not batch:
            return
        revisions: dict[uuid.UUID, list[dict[str, Any]]] = {entry.id: [] for entry in batch}
        found = EntryRevision.objects.filter(codex=codex, entry_id__in=revisions).order_by("entry_id", "revision")
        for revision in found:
            revisions[revision.entry_id].append(_revision_dict(revision))
        for entry in batch:
            data = entry_dict(entry)
            data["revisions"] = revisions[entry.id]
            yield data
        after = batch[-1].id


def export_json_chunks(*, codex: Codex, progress: Progress | None = None) -> Iterator[str]:
    """The export document as text chunks: a header, then one line per entry.

    One entry per line keeps the file readable with line tools; it is still one JSON document.
    """
    header = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exportedAt": rfc3339_ms(timezone.now()),
        "owner": codex.owner.get_username(),
    }
    yield json.dumps(header, ensure_ascii=False)[:-1] + ', "entries": ['
    for count, data in enumerate(export_entries(codex=codex), start=1):
        yield ("\n" if count == 1 else ",\n") + json.dumps(data, ensure_ascii=False)
        if progress is not None:
            progress(count)
    yield "\n]}\n"


def entries_newest_first(*, codex: Codex, batch_size: int = EXPORT_BATCH) -> Iterator[tuple[Entry, bool]]:
    """Every entry, newest first (``updated_at``, then the write order, descending: the list
    page's order and index), then, flagged, those written while this ran.

    The keyset batches hold no snapshot, so an entry written during the walk moves ahead of
    its cursor. So the walk takes only what was written before it began (``write_seq``, the
    codex's write order, says which), and the rest follow in write order, where a write only
    ever moves an entry further ahead: no entry is left out, and one written again after it
    was listed is listed again, its earlier state first."""
    began = Codex.objects.filter(pk=codex.pk).values_list("last_write_seq", flat=True).get()
    newest_first = Entry.objects.filter(codex=codex, write_seq__lte=began).order_by("-updated_at", "-write_seq")
    after = Q()
    while batch := list(newest_first.filter(after)[:batch_size]):
        yield from ((entry, False) for entry in batch)
        last = batch[-1]
        after = Q(updated_at__lt=last.updated_at) | Q(updated_at=last.updated_at, write_seq__lt=last.write_seq)
    written = began
    while batch := list(Entry.objects.filter(codex=codex, write_seq__gt=written).order_by("write_seq")[:batch_size]):
        yield from ((entry, True) for entry in batch)
        written = batch[-1].write_seq


def export_markdown_chunks(*, codex: Codex, batch_size: int = EXPORT_BATCH) -> Iterator[str]:
    """The current state of every note as one Markdown file to read (not importable), newest
    first as the list page shows them."""
    owner = codex.owner.get_username()
    yield f"# {owner}'s notebook\n\nExported {rfc3339_ms(timezone.now())}, newest first.\n"
    heading_given = False
    for entry, during in entries_newest_first(codex=codex, batch_size=batch_size):
        if during and not heading_given:
            heading_given = True
            yield "\n---\n\nWritten while this file was being made (an earlier state of some may be above):\n"
        data = entry_dict(entry)
        title = data.get("title") or "Untitled note"
        lines = [f"\n## {title}\n", f"- id: `{data['id']}`", f"- revision: {data['revision']}"]
        lines.append(f"- updated: {data['updatedAt']} (created {data['createdAt']})")
        if data["tags"]:
            lines.append("- tags: " + ", ".join(f"`{tag}`" for tag in data["tags"]))
        if data["relatedAgentIds"]:
            lines.append("- related agents: " + ", ".join(f"`{agent}`" for agent in data["relatedAgentIds"]))
        # A fence longer than any backtick run in the content keeps the content verbatim.
        fence = "`" * max(3, _longest_backtick_run(data["content"]) + 1)
        lines.append(f"\n{fence}text\n{data['content']}\n{fence}\n")
        yield "\n".join(lines)


def markdown_note(data: dict[str, Any]) -> tuple[str, str]:
    """One entry's export object as a note for a Markdown notebook (Obsidian and the like):
    a file name from its title and id, and YAML front matter followed by the content exactly."""
    meta: dict[str, Any] = {"id": data["id"]}
    if "title" in data:
        meta["title"] = data["title"]
    meta.update(
        tags=data["tags"],
        related_agents=data["relatedAgentIds"],
        revision=data["revision"],
        created=data["createdAt"],
        updated=data["updatedAt"],
    )
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, width=1_000_000)
    slug = slugify(data.get("title") or "", allow_unicode=True)[:60].strip("-_") or "untitled"
    return f"{slug}-{data['id'][:8]}.md", f"---\n{front}---\n{data['content']}"


class _WrittenChunks:
    """A write-only file for ``zipfile`` (which then writes a streamable archive, with data
    descriptors instead of seeking back): hands out what was written since the last take."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self.parts = b"".join(self.parts), []
        return data


def export_markdown_zip_chunks(*, codex: Codex) -> Iterator[bytes]:
    """The current state of every entry as a zip of Markdown notes (``markdown_note``), one
    file per entry, streamed entry by entry (readable, not importable)."""
    out = _WrittenChunks()
    names: set[str] = set()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for data in export_entries(codex=codex):
            name, text = markdown_note(data)
            if name in names:  # two titles with ids sharing their first 8 digits
                name = f"{name[:-12]}-{data['id']}.md"
            names.add(name)
            updated = dt.datetime.fromisoformat(data["updatedAt"])
            info = zipfile.ZipInfo(name, date_time=updated.timetuple()[:6])
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            archive.writestr(info, text)
            yield out.take()
    yield out.take()


def _longest_backtick_run(text: str) -> int:
    longest = current = 0
    for ch in text:
        current = current + 1 if ch == "`" else 0
        longest = max(longest, current)
    return longest


# --- Import -------------------------------------------------------------------------------


class ImportRefused(Exception):
    """The file as a whole is not an export this server can read (nothing was written)."""


@dataclass
class Refusal:
    index: int  # position in the file's "entries", from 0
    entry_id: str  # as written in the file ("" when missing)
    reason: str


@dataclass
class ImportReport:
    """What an import did. When ``refused`` is not empty nothing was written."""

    total: int = 0
    created: int = 0
    already_present: int = 0
    renumbered: int = 0  # created under a new id because the file's id is in use elsewhere
    refused: list[Refusal] = field(default_factory=list)
    refused_count: int = 0

    @property
    def applied(self) -> bool:
        return self.refused_count == 0


@dataclass(frozen=True)
class _Snapshot:
    revision: int
    data: EntryInput
    recorded_at: dt.datetime
    writer: Writer


@dataclass(frozen=True)
class _ImportedEntry:
    entry_id: uuid.UUID
    revision: int
    data: EntryInput
    created_at: dt.datetime
    updated_at: dt.datetime
    snapshots: tuple[_Snapshot, ...]


_ENTRY_MEMBERS = frozenset(
    {"id", "revision", "title", "content", "tags", "relatedAgentIds", "provenance", "createdAt", "updatedAt"}
)
_SNAPSHOT_FIELDS = tuple(member for member, _ in _SNAPSHOT_COLUMNS)


def load_document(raw: bytes | str) -> dict[str, Any]:
    """Parse an export file and check its envelope; ``ImportRefused`` says what is wrong.

    Read as any stranger's JSON is (``common.inputs.json_document``), which refuses in words what
    ``json.loads`` would turn into a Python fault or a row no database can hold: nesting past the
    parser's limit, a lone surrogate, ``NaN`` and ``Infinity``.
    """
    not_an_export = "this is not an Agent Codex export (a JSON file from Export)"
    try:
        document = json_document(raw)
    except JSONRefused as refused:
        raise ImportRefused(f"{not_an_export}: {refused.problem}") from None
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        raise ImportRefused(f'{not_an_export}: it has no "format": "{EXPORT_FORMAT}"')
    version = document.get("version")
    if isinstance(version, bool) or version not in READABLE_VERSIONS:
        readable = " and ".join(str(v) for v in READABLE_VERSIONS)
        given = shown(json.dumps(version)) if isinstance(version, str | int | float) or version is None else "that"
        raise ImportRefused(f"export version {given} is not supported (this server reads {readable})")
    if not isinstance(document.get("entries"), list):
        raise ImportRefused('the file has no "entries" array')
    return document


# RFC 3339 date-time (section 5.6) in ASCII digits, with its time zone; fromisoformat alone
# also takes dates without a time, week dates, and digits of other scripts.
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_EARLIEST = dt.datetime.fromisoformat(IMPORT_EARLIEST_TIME)


def _moment(value: Any, path: str, latest: dt.datetime) -> dt.datetime:
    """An RFC 3339 time the services could have written: from ``IMPORT_EARLIEST_TIME`` to
    ``latest`` (the import's start plus the allowed clock skew), to the millisecond."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{path} must be an RFC 3339 time string")
    if not _RFC3339.fullmatch(value):
        raise InvalidArgument(f"{path} is not an RFC 3339 time such as 2026-11-30T12:34:56.789Z")
    try:
        # Nanoseconds: Python keeps microseconds, and the services keep milliseconds.
        moment = dt.datetime.fromisoformat(re.sub(r"(\.[0-9]{6})[0-9]+", r"\1", value.upper()))
        moment = moment.astimezone(dt.UTC)  # OverflowError past year 1 or 9999
    except (ValueError, OverflowError):
        raise InvalidArgument(f"{path} is not a time in the calendar") from None
    if not _EARLIEST <= moment <= latest:
        raise InvalidArgument(f"{path} must be from {IMPORT_EARLIEST_TIME} to now; it is {value}")
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _revision_number(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SAFE_INTEGER:
        raise InvalidArgument(f"{path} must be an integer from 1 to {MAX_SAFE_INTEGER}")
    return value


def _entry_input(raw: dict[str, Any], path: str) -> EntryInput:
    """The tools' own entry rules (contract 3), with the path of this entry in the message."""
    try:
        return parse_entry_input({name: raw[name] for name in _SNAPSHOT_FIELDS if name in raw})
    except InvalidArgument as error:
        raise InvalidArgument(error.message.replace("entry.", f"{path}.", 1)) from None


_WRITER_MEMBERS = {"kind": "kind", "clientId": "client id", "name": "name", "scopes": "scopes"}


def _imported_writer(raw: Any, path: str) -> Writer:
    """Who an imported snapshot is recorded as written by: an import, carrying the writer the
    file names (if any) as information. The file's claim is never linked to an application
    of this server, so it does not count as that application's writing here."""
    if raw is None:
        return IMPORT_WRITER
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{path} must be an object")
    extra = sorted(set(raw) - set(_WRITER_MEMBERS))
    if extra:
        raise InvalidArgument(f"{path} has unknown member {extra[0]!r}")
    values = {}
    for member in _WRITER_MEMBERS:
        # The name rule every door that takes a name applies, so that a name any of them
        # accepted (and recorded on a revision) imports.
        value = raw.get(member, "")
        if problem := name_problem(value, max_chars=WRITER_FIELD_MAX_CHARS, what=f"{path}.{member}"):
            raise InvalidArgument(problem)
        values[member] = value
    if values["kind"] not in KINDS:
        raise InvalidArgument(f"{path}.kind must be one of {', '.join(KINDS)}")
    if values["kind"] == UNKNOWN:
        return IMPORT_WRITER
    return Writer(IMPORT, None, values["clientId"], values["name"], values["scopes"])


def _unknown(members: Any, allowed: frozenset[str] | set[str], path: str | None) -> None:
    extra = sorted(set(members) - set(allowed))
    if extra:
        name = shown(extra[0], max_chars=IMPORT_REPORT_TEXT_CHARS)
        raise InvalidArgument(f"{path} has unknown member {name!r}" if path else f"unknown member {name!r}")


def _same_fields(a: EntryInput, b: EntryInput) -> str | None:
    """The first entry field in which ``a`` and ``b`` differ, by its export name."""
    for member, attribute in (
        ("title", "title"),
        ("content", "content"),
        ("tags", "tags"),
        ("relatedAgentIds", "related_agent_ids"),
        ("provenance", "provenance"),
    ):
        if getattr(a, attribute) != getattr(b, attribute):
            return member
    return None


def _parse_entry(raw: Any, version: int, latest: dt.datetime) -> _ImportedEntry:
    """One entry of an export file, refused unless the services could have written it:
    the tools' rules for every field, times in the calendar and in order, and a history
    that leads to it (snapshots 1 to ``revision``, oldest first; revision 1 recorded at
    ``createdAt``, the newest at ``updatedAt`` with exactly the entry's fields)."""
    if not isinstance(raw, dict):
        raise InvalidArgument("the entry must be an object")
    _unknown(raw, _ENTRY_MEMBERS | {"revisions"}, None)
    entry_id = parse_entry_id(raw.get("id"))
    revision = _revision_number(raw.get("revision"), "revision")
    data = _entry_input(raw, "entry")
    created_at = _moment(raw.get("createdAt"), "createdAt", latest)
    updated_at = _moment(raw.get("updatedAt"), "updatedAt", latest)
    if updated_at < created_at:
        raise InvalidArgument("updatedAt is earlier than createdAt")

    raw_revisions = raw.get("revisions")
    if not isinstance(raw_revisions, list) or not raw_revisions:
        raise InvalidArgument("revisions must be a non-empty array of snapshots")
    if len(raw_revisions) != revision:
        held = len(raw_revisions)
        raise InvalidArgument(
            f"revisions must hold every snapshot from 1 to the entry's revision {revision}, not {held}"
        )
    snapshots: list[_Snapshot] = []
    allowed = {"revision", "recordedAt", "writer"} if version >= 2 else {"revision", "recordedAt"}
    for index, snapshot in enumerate(raw_revisions):
        path = f"revisions[{index}]"
        if not isinstance(snapshot, dict):
            raise InvalidArgument(f"{path} must be an object")
        _unknown(snapshot, set(_SNAPSHOT_FIELDS) | allowed, path)
        number = _revision_number(snapshot.get("revision"), f"{path}.revision")
        if number != index + 1:
            raise InvalidArgument(f"{path}.revision is {number}; snapshots run from 1, oldest first, without gaps")
        recorded_at = _moment(snapshot.get("recordedAt"), f"{path}.recordedAt", latest)
        if snapshots and recorded_at < snapshots[-1].recorded_at:
            raise InvalidArgument(f"{path}.recordedAt is earlier than revision {index}'s")
        snapshots.append(
            _Snapshot(
                number,
                _entry_input(snapshot, path),
                recorded_at,
                _imported_writer(snapshot.get("writer"), f"{path}.writer"),
            )
        )
    if snapshots[0].recorded_at != created_at:
        raise InvalidArgument("createdAt differs from revision 1's recordedAt")
    if snapshots[-1].recorded_at != updated_at:
        raise InvalidArgument(f"updatedAt differs from the newest revision's ({revision}) recordedAt")
    if member := _same_fields(data, snapshots[-1].data):
        raise InvalidArgument(f"the entry's {member} differs from its newest revision's ({revision}) snapshot")
    return _ImportedEntry(entry_id, revision, data, created_at, updated_at, tuple(snapshots))


def _candidate_ids(codex: Codex, wanted: uuid.UUID) -> Iterator[uuid.UUID]:
    """The ids the entry may get in this codex, in order: the file's id, then ids derived
    from this codex and the file's id, so that importing the same file again tries the same
    ids and finds the same entry."""
    yield wanted
    for attempt in range(99):
        digest = hashlib.sha256(f"agent-codex-import:{codex.pk}:{wanted}:{attempt}".encode()).digest()
        yield uuid.UUID(bytes=digest[:16], version=4)


def _import_entry(codex: Codex, item: _ImportedEntry) -> uuid.UUID | None:
    """Create the entry in this codex under the first of its candidate ids that is free, or
    return None if one of them is already this codex's (imported before); the id it got.

    Every query names this codex: an id another codex holds is found by inserting it and
    colliding on the primary key (in a savepoint), so nothing of the other codex is read.
    """
    for candidate in _candidate_ids(codex, item.entry_id):
        if Entry.objects.filter(codex=codex, pk=candidate).exists():
            return None
        try:
            with transaction.atomic():
                _create(codex, candidate, item)
        except IntegrityError:
            continue  # another codex's id: the next candidate
        return candidate
    raise InvalidArgument("no free id could be found for this entry")  # pragma: no cover


def _create(codex: Codex, entry_id: uuid.UUID, item: _ImportedEntry) -> None:
    entry = Entry(
        id=entry_id, codex=codex, revision=item.revision, created_at=item.created_at, updated_at=item.updated_at
    )
    apply_input(entry, item.data)
    stored = sum(quotas.input_bytes(snapshot.data) for snapshot in item.snapshots)
    # In the caller's savepoint: an id another codex holds collides here, and the charge is
    # rolled back with it.
    entry.write_seq = quotas.charge(codex=codex, entries=1, stored_bytes=stored)
    entry.save(force_insert=True)
    EntryRevision.objects.bulk_create(
        EntryRevision(
            codex=codex,
            **snapshot.writer.columns(),
            entry=entry,
            revision=snapshot.revision,
            title=snapshot.data.title,
            content=snapshot.data.content,
            tags=list(snapshot.data.tags),
            related_agent_ids=list(snapshot.data.related_agent_ids),
            provenance=snapshot.data.provenance,
            recorded_at=snapshot.recorded_at,
        )
        for snapshot in item.snapshots
    )
    EntryTag.objects.bulk_create(EntryTag(codex=codex, entry=entry, value=value) for value in item.data.tags)
    EntryRelatedAgent.objects.bulk_create(
        EntryRelatedAgent(codex=codex, entry=entry, value=value) for value in item.data.related_agent_ids
    )


def codex_import(*, codex: Codex, document: dict[str, Any], progress: Progress | None = None) -> ImportReport:
    """Import an export document (from ``load_document``) into ``codex``.

    Every entry is checked first with the tools' rules; if any is refused, nothing is
    written and the report lists why. Otherwise, in one transaction, each entry is created
    with its revisions unless it is already in this codex (so importing a file twice
    creates nothing new). Request keys are not part of an export. An import that would
    pass the codex's quotas writes nothing and raises ``ImportRefused``.
    """
    raw_entries = document["entries"]
    report = ImportReport(total=len(raw_entries))
    parsed: list[_ImportedEntry] = []
    seen_ids: set[uuid.UUID] = set()
    latest = timezone.now() + dt.timedelta(seconds=IMPORT_CLOCK_SKEW_SECONDS)
    for index, raw in enumerate(raw_entries):
        try:
            item = _parse_entry(raw, document["version"], latest)
            if item.entry_id in seen_ids:
                raise InvalidArgument("the same id appears earlier in the file")
            seen_ids.add(item.entry_id)
            parsed.append(item)
        except InvalidArgument as error:
            report.refused_count += 1
            if len(report.refused) < REPORT_MAX_REFUSALS:
                raw_id = raw.get("id") if isinstance(raw, dict) else None
                report.refused.append(
                    Refusal(
                        index,
                        shown(raw_id, max_chars=IMPORT_REPORT_TEXT_CHARS),
                        shown(error.message, max_chars=IMPORT_REPORT_TEXT_CHARS),
                    )
                )
    if report.refused_count:
        return report

    try:
        _write(codex, parsed, report, progress)
    except ResourceExhausted as error:
        # The transaction rolled back: all or nothing holds for quotas too.
        raise ImportRefused(f"nothing imported: {error.message}") from None
    return report


@write_transaction()
def _write(codex: Codex, parsed: list[_ImportedEntry], report: ImportReport, progress: Progress | None) -> None:
    for done, item in enumerate(parsed, start=1):
        entry_id = _import_entry(codex, item)
        if entry_id is None:
            report.already_present += 1
        else:
            report.created += 1
            report.renumbered += entry_id != item.entry_id
        if progress is not None:
            progress(done)
