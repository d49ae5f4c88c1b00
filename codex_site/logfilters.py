"""Log levels that say whose fault it was.

Django logs every refused request itself: a bad ``Host``, too many form fields, an
oversized field or a broken multipart body at ERROR (``django.security.*``) or WARNING
(``django.request``), each with the exception's traceback. Those are a client's mistakes
and the server answered them correctly with a 4xx, so they are one WARNING line here,
without a traceback; ERROR stays for the server's own faults (5xx, unhandled
exceptions). Database outages keep their own rule (``codex_site.outage``: one line per
refused request, a traceback once per outage), which this filter never touches.

A filter on the handler, not on a logger: ``django.security.DisallowedHost`` and its
siblings are child loggers, and a logger's filters do not apply to records that only
propagate through it.
"""

import logging

from django.core.exceptions import BadRequest, RequestAborted, SuspiciousOperation
from django.http import UnreadablePostError
from django.http.multipartparser import MultiPartParserError

CLIENT_ERRORS = (BadRequest, SuspiciousOperation, MultiPartParserError, UnreadablePostError, RequestAborted)
LINE_CHARS = 300


def is_client_mistake(record: logging.LogRecord) -> bool:
    status = getattr(record, "status_code", None)
    if isinstance(status, int):
        return 400 <= status < 500
    if record.exc_info and record.exc_info[1] is not None:
        return isinstance(record.exc_info[1], CLIENT_ERRORS)
    return False


class ClientMistakesAreWarnings(logging.Filter):
    """A client's mistake becomes one WARNING line without a traceback (if the logger
    that wrote it shows WARNING at all); every other record passes unchanged."""

    # An access line (common.access_log) carries neither ``status_code`` nor ``exc_info``:
    # it is never a client's mistake here, so it passes unchanged.
    passes_access_lines = True

    def filter(self, record: logging.LogRecord) -> bool:
        if not is_client_mistake(record):
            return True
        if record.levelno > logging.WARNING:
            if not logging.getLogger(record.name).isEnabledFor(logging.WARNING):
                return False
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        if record.exc_info or record.exc_text or record.stack_info or "\n" in str(record.msg):
            message = " ".join(record.getMessage().split())
            record.msg = message if len(message) <= LINE_CHARS else message[: LINE_CHARS - 1] + "…"
            record.args = None
            record.exc_info = record.exc_text = record.stack_info = None
        return True
