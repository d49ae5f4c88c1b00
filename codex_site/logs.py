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
"""

import logging
from datetime import UTC, datetime
from typing import Any, NamedTuple

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.orjson import OrjsonFormatter


class CodexPlainFormatter(logging.Formatter):
    """The plain line: ``<local time>,<ms> <level> <logger> <message>``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def render_fields(self, level: str, logger: str, message: str, fields: dict[str, Any], *, created: float) -> str:
        """The line ``format`` makes of a record of ``level`` from ``logger`` with this message,
        ``created`` at that ``time.time()``, made without the record (the fields are not part of
        a plain line). The time is ``formatTime``'s, which reads only a record's ``created``
        and ``msecs``."""
        msecs = int((created - int(created)) * 1000) + 0.0  # as LogRecord computes them
        return f"{self.formatTime(_Created(created, msecs))} {level} {logger} {message}"  # type: ignore[arg-type]


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
