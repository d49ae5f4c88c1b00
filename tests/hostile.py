"""What every hostile-input test checks after each case: what the server's configured log
handlers emitted (no ERROR, no traceback), and that the database holds only what the
services could have written."""

import contextlib
import io
import itertools
import logging
import socket
import time
from collections.abc import Iterator

from django.test import SimpleTestCase

from notebook import quotas
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.validation import normalize_for_search

# Loggers the test runner quiets; raised to INFO while logs are captured, so that what a
# production server would print (at its default INFO) is what the test sees.
_QUIETED = ("", "django", "django.request", "django.security", "django.server")


class EmittedLogs(io.StringIO):
    """The text the handlers wrote, and each emitted record's final level and whether it
    carried a traceback (what the filters left of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[int, bool, str]] = []

    def errors(self) -> list[str]:
        return [message for level, _, message in self.records if level >= logging.ERROR]

    def tracebacks(self) -> list[str]:
        return [message for _, traceback, message in self.records if traceback]


@contextlib.contextmanager
def emitted_logs() -> Iterator[EmittedLogs]:
    """Everything the configured handlers (their formatters and filters included) emit at
    INFO and above while the block runs, in this process's threads (a live server's too,
    uvicorn's own log lines included)."""
    stream = EmittedLogs()
    # uvicorn's loggers have handlers of their own and do not propagate to the root.
    owners = [logging.getLogger(name) for name in ("", "uvicorn", "uvicorn.error", "uvicorn.access")]
    handlers = list(
        {id(h): h for owner in owners for h in owner.handlers if isinstance(h, logging.StreamHandler)}.values()
    )
    streams = [handler.setStream(stream) for handler in handlers]

    def recording(emit):
        def emit_and_record(record: logging.LogRecord) -> None:
            stream.records.append((record.levelno, bool(record.exc_info or record.exc_text), record.getMessage()))
            emit(record)

        return emit_and_record

    for handler in handlers:
        handler.emit = recording(handler.emit)  # type: ignore[method-assign]
    levels = [(logging.getLogger(name), logging.getLogger(name).level) for name in _QUIETED]
    for logger, _ in levels:
        logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        for logger, level in levels:
            logger.setLevel(level)
        for handler, old in zip(handlers, streams, strict=True):
            del handler.emit  # back to the class's method
            handler.setStream(old)


def consistency_problems() -> list[str]:
    """What in the database no sequence of service calls could have written."""
    problems = []
    revisions: dict = {}
    for revision in EntryRevision.objects.order_by("entry_id", "revision"):
        revisions.setdefault(revision.entry_id, []).append(revision)
    tags: dict = {}
    for entry_id, value in EntryTag.objects.values_list("entry_id", "value"):
        tags.setdefault(entry_id, set()).add(value)
    agents: dict = {}
    for entry_id, value in EntryRelatedAgent.objects.values_list("entry_id", "value"):
        agents.setdefault(entry_id, set()).add(value)
    for entry in Entry.objects.all():
        history = revisions.get(entry.id, [])
        if [r.revision for r in history] != list(range(1, entry.revision + 1)):
            problems.append(f"{entry.id}: revisions {[r.revision for r in history]} at revision {entry.revision}")
            continue
        newest = history[-1]
        current = (entry.title, entry.content, entry.tags, entry.related_agent_ids, entry.provenance)
        snapshot = (newest.title, newest.content, newest.tags, newest.related_agent_ids, newest.provenance)
        if current != snapshot:
            problems.append(f"{entry.id}: current fields differ from the newest snapshot")
        if history[0].recorded_at != entry.created_at or newest.recorded_at != entry.updated_at:
            problems.append(f"{entry.id}: times disagree with the snapshots")
        if any(a.recorded_at > b.recorded_at for a, b in itertools.pairwise(history)):
            problems.append(f"{entry.id}: snapshots out of time order")
        if tags.get(entry.id, set()) != set(entry.tags) or agents.get(entry.id, set()) != set(entry.related_agent_ids):
            problems.append(f"{entry.id}: index rows differ from the fields")
        if entry.content_bytes != len(entry.content.encode()) or entry.search_content != normalize_for_search(
            entry.content
        ):
            problems.append(f"{entry.id}: derived columns differ")
        if entry.codex_id != newest.codex_id:
            problems.append(f"{entry.id}: revision in another codex")
    for codex in Codex.objects.all():
        count = Entry.objects.filter(codex=codex).count()
        stored = quotas.revisions_bytes(EntryRevision.objects.filter(codex=codex))
        if (codex.entry_count, codex.stored_bytes) != (count, stored):
            problems.append(f"codex {codex.pk}: usage {codex.entry_count}/{codex.stored_bytes}, holds {count}/{stored}")
    return problems


def assert_consistent(test: SimpleTestCase) -> None:
    problems = consistency_problems()
    test.assertEqual(problems, [], "\n".join(problems[:20]))


def raw_request(port: int, head: bytes, body: bytes = b"", *, wait: float = 10) -> tuple[bytes, float]:
    """Send ``head`` and ``body`` on a fresh connection; what came back (until the server
    closed or ``wait`` seconds passed) and how long the first byte took."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        started = time.monotonic()
        sock.sendall(head + body)
        chunks = []
        first = None
        try:
            while True:
                chunk = sock.recv(65536)
                if first is None:
                    first = time.monotonic() - started
                if not chunk:
                    break
                chunks.append(chunk)
                if b"\r\n\r\n" in b"".join(chunks) and len(b"".join(chunks)) > 12:
                    break
        except TimeoutError:
            pass
        return b"".join(chunks), (first if first is not None else wait)
