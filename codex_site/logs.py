"""Log formats and filters named in ``settings.LOGGING``.

``CODEX_LOG_FORMAT=json`` writes one JSON object per line (python-json-logger's orjson
formatter) with stable keys: ``time`` (RFC 3339, UTC), ``level``, ``logger``, ``message``,
any ``extra`` fields (an access line's ``method``, ``path``, ``status``, ``duration_ms`` and
``client``; a tool call's ``tool``, ``outcome``, ``tool_duration_ms``, ``codex_id``,
``request_id``, ``trace_id``), and ``exc_info`` for a traceback. The default, ``plain``, is
one line of text: the time, the level, the logger and the message.

Both formatters can also render a line from its fields without a record (``render_fields``),
as the access log writes its lines (``common.access_log``).

No line carries note content, titles, tags, tokens or cookies: the project's own lines name
ids, codes and durations only; the access line (``common.access_log``) drops query strings'
values (an authorization URL's state, a token someone put in a URL: refused, but logged it
would still leak); Django logs request paths without query strings.

Nothing a request sends writes a line of its own (contract 10: the access log is also the audit
log). Both formatters pass every line, on both of its paths (a record, and ``render_fields``),
through ``one_line``, which writes each character that could end a line or act on a terminal as
JSON's escape for it. So whatever a stranger chose (a path, a query's names, a JSON-RPC id, a
metadata document's client id, a username, an exception's message, an address a proxy's header
gave), and whoever logged it (this project, Django, uvicorn, allauth, DOT), one record is one
physical line. A plain record's traceback (or stack) is the one exception, multi-line by nature:
its lines follow the record's, each indented by ``CONTINUATION`` and escaped. An exception's
message may quote a stranger, and its LFs cannot be told from the traceback's own, so each of
them starts an indented line too; a record's own line begins with its time, never with a space,
so no continuation line can be read as a record (the rule a shipper's multiline parser takes:
a line that begins with white space continues the record above it). In JSON a traceback is the
string ``exc_info``, on the record's one line.
"""

import json
import logging
import re
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.orjson import OrjsonFormatter

# What ``one_line`` escapes: every character ``str.splitlines`` ends a line at (LF, CR, VT, FF,
# the file, group and record separators, NEL, U+2028, U+2029), the other C0 and C1 controls (ESC
# and CSI begin ANSI sequences, which a terminal acts on), DEL, and the bidirectional embeddings,
# overrides and isolates (which make a viewer show a line in another order than it reads).
_UNSAFE_RANGES = ((0x00, 0x1F), (0x7F, 0x9F), (0x2028, 0x2029), (0x202A, 0x202E), (0x2066, 0x2069))
_UNSAFE = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in _UNSAFE_RANGES) + "]")
# Each as JSON writes it: the short escapes where JSON has one, ``\uXXXX`` for the rest.
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPES = {
    code: _SHORT_ESCAPES.get(chr(code), f"\\u{code:04x}")
    for low, high in _UNSAFE_RANGES
    for code in range(low, high + 1)
}

# What begins each line of a plain record's traceback (a record's own line begins with its time).
CONTINUATION = "  "


def one_line(text: str) -> str:
    """``text`` with each character that could end its line or act on a terminal (``_UNSAFE``)
    written as JSON writes it (``\\n``, ``\\r``, ``\\u001b``, ``\\u2028``, ...): the one escape
    of every log line (the module's docstring). A backslash stays as it is: it ends no line, and
    Django's own lines (``log_response``) and ``%r`` arguments carry escapes already, which would
    read doubled.

    Nothing to escape is the common case, found in C without the expression (an ASCII text is
    printable exactly when it holds no C0 control and no DEL), or by one search. The escaping
    itself is ``str.translate``, in C too: a stranger who fills a path with controls makes no
    Python call per character (as ``re.sub`` with a function would, many times slower)."""
    if (text.isascii() and text.isprintable()) or _UNSAFE.search(text) is None:
        return text
    return text.translate(_ESCAPES)


class CodexPlainFormatter(logging.Formatter):
    """The plain line: ``<local time>,<ms> <level> <logger> <message>``, the message escaped by
    ``one_line``; a traceback or a stack follows on lines of its own, each indented by
    ``CONTINUATION`` and escaped."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        # logging.Formatter.format, with the message escaped and the traceback's lines indented.
        # The record's exc_text stays what formatException made (other handlers read it).
        record.message = one_line(record.getMessage())
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line += _continued(record.exc_text)
        if record.stack_info:
            line += _continued(self.formatStack(record.stack_info))
        return line

    def render_fields(self, level: str, logger: str, message: str, fields: dict[str, Any], *, created: float) -> str:
        """The line ``format`` makes of a record of ``level`` from ``logger`` with this message,
        ``created`` at that ``time.time()``, made without the record (the fields are not part of
        a plain line). The time is ``formatTime``'s, which reads only a record's ``created``
        and ``msecs``."""
        msecs = int((created - int(created)) * 1000) + 0.0  # as LogRecord computes them
        return f"{self.formatTime(_Created(created, msecs))} {level} {logger} {one_line(message)}"  # type: ignore[arg-type]


def _continued(text: str) -> str:
    """A traceback's (or a stack's) lines after the record's: at each LF (the traceback's own,
    or one in an exception's message) a line indented by ``CONTINUATION``; every other character
    that could end a line is escaped, as in any line."""
    return "".join(f"\n{CONTINUATION}{one_line(line)}" for line in text.removesuffix("\n").split("\n"))


class _Created(NamedTuple):
    """What ``logging.Formatter.formatTime`` reads of a record."""

    created: float
    msecs: float


class CodexJsonFormatter(OrjsonFormatter):
    """The JSON line: the renamed standard keys first, then the record's extras."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            # uvicorn passes an ANSI-coloured copy of some messages as an extra.
            reserved_attrs=[*RESERVED_ATTRS, "color_message", "taskName"],
        )

    def render_fields(self, level: str, logger: str, message: str, fields: dict[str, Any], *, created: float) -> str:
        """The line ``format`` makes of a record of ``level`` from ``logger`` with this message
        and these extras, ``created`` at that ``time.time()``, made without the record: the
        access log's line (``common.access_log`` writes it to the handler's stream itself). Same
        keys in the same order, the same time (python-json-logger's, from the record's
        ``created``), and the same serialiser (its ``process_log_record`` and
        ``serialize_log_record``)."""
        data = {
            "level": level,
            "logger": logger,
            "message": message,
            **fields,
            "time": datetime.fromtimestamp(created, tz=UTC),
        }
        return self.serialize_log_record(self.process_log_record(data))

    def serialize_log_record(self, log_data: dict[str, Any]) -> str:
        """The JSON line, through ``one_line``: orjson escapes the C0 controls, but writes DEL,
        the C1 controls, U+2028, U+2029 and the bidirectional controls as they are (valid JSON,
        but many viewers end a line at U+2028 or NEL). Each of them can only be inside a string
        of the line, where its ``\\uXXXX`` escape is the same JSON value. An ASCII line without
        DEL holds none of them: one check of a flag, and a search for one character."""
        try:
            line = super().serialize_log_record(log_data)
        except TypeError:
            # orjson refuses a lone surrogate (a JSON-RPC id or a path may carry one, escaped as
            # "\ud800"): the json module writes it as that same escape, so the line still reads
            # back as what was sent.
            line = self.prefix + json.dumps(log_data, default=self.json_default, separators=(",", ":"))
        return line if line.isascii() and "\x7f" not in line else one_line(line)


class NoDebugFrom(logging.Filter):
    """Drops DEBUG records of the loggers ``names`` (and their children), leaving every
    other level to the configuration."""

    passes_access_lines = True  # an access line is INFO: this filter lets it through unchanged

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.prefixes = tuple(names) + tuple(name + "." for name in names)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO or not (
            record.name in self.prefixes or record.name.startswith(self.prefixes)
        )
