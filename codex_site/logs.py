"""Log formats and filters named in ``settings.LOGGING``.

``CODEX_LOG_FORMAT=json`` writes one JSON object per line (python-json-logger) with stable
keys: ``time`` (RFC 3339, UTC), ``level``, ``logger``, ``message``, any ``extra`` fields
(a tool call's ``tool``, ``outcome``, ``duration_ms``, ``codex_id``, ``request_id``,
``trace_id``), and ``exc_info`` for a traceback. The default, ``plain``, is one line of text.

No line carries note content, titles, tags, tokens or cookies: the project's own lines name
ids, codes and durations only; uvicorn's access lines lose their query strings' values
(an authorization URL's state, a token someone put in a URL: refused, but logged it would
still leak); Django logs request paths without query strings.

``AccessLogQueryValues`` relies on the arguments of uvicorn's access-log call (not a
documented API; uvicorn ``common.tracing.UVICORN_VERSION_CHECKED``): ``tests/test_logs.py``
fails if a query value reaches the log.
"""

import logging
import re

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

FORMATS = ("plain", "json")
PLAIN_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"

_QUERY_VALUE = re.compile(r"=[^&;]*")


class CodexJsonFormatter(JsonFormatter):
    """The JSON line: the renamed standard keys first, then the record's extras."""

    def __init__(self) -> None:
        super().__init__(
            "%(levelname)s %(name)s %(message)s",
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
            # uvicorn passes an ANSI-coloured copy of some messages as an extra.
            reserved_attrs=[*RESERVED_ATTRS, "color_message", "taskName"],
        )


def without_query_values(target: str) -> str:
    """``/o/authorize/?client_id=a&state=b`` -> ``/o/authorize/?client_id=&state=``: which
    parameters came stays visible, what they said does not."""
    path, mark, query = target.partition("?")
    return path + mark + _QUERY_VALUE.sub("=", query) if mark else target


class NoDebugFrom(logging.Filter):
    """Drops DEBUG records of the loggers ``names`` (and their children), leaving every
    other level to the configuration."""

    def __init__(self, names: list[str]) -> None:
        super().__init__()
        self.prefixes = tuple(names) + tuple(name + "." for name in names)

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.INFO or not (
            record.name in self.prefixes or record.name.startswith(self.prefixes)
        )


class AccessLogQueryValues(logging.Filter):
    """Drops the values of query strings from uvicorn's access lines, whose arguments are
    ``(client, method, path with query, HTTP version, status)``."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], without_query_values(args[2]), args[3], args[4])
        return True
