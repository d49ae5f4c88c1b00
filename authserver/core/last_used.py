"""When each application last called a tool on a person's codex, to the minute, for
Connected applications (contract 9), without a write per tool call.

Each process remembers, per person and application, the minute it last wrote; a tool call
in the same minute costs a dictionary lookup and nothing else. The first call of a new
minute writes that minute (one UPDATE, or an INSERT the first time), so the table is written
at most once a minute per person and application by each process, and the page is right to
the minute. A write that fails (the database away for a moment) is logged and tried again
by the next call; it never fails the tool call. A process that stops loses nothing but a
minute not yet written, which its next call would have written.
"""

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable

from django.db import DatabaseError, IntegrityError, transaction

from authserver.models import ClientUse

logger = logging.getLogger(__name__)

# Past this many (person, application) pairs, the minutes of earlier minutes are forgotten.
REMEMBERED_MAX = 10_000


class LastUsed:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._written: dict[tuple[int, int], int] = {}
        self._lock = threading.Lock()

    def touch(self, user_id: int, application_id: int | None) -> None:
        """A tool call by ``application_id`` on ``user_id``'s codex, now."""
        if application_id is None:
            return
        minute = int(self.clock() // 60)
        key = (user_id, application_id)
        if self._written.get(key) == minute:  # the hot path: already written this minute
            return
        with self._lock:
            if self._written.get(key) == minute:
                return
            if len(self._written) >= REMEMBERED_MAX:
                self._written = {pair: seen for pair, seen in self._written.items() if seen == minute}
            self._written[key] = minute
        try:
            record_use(user_id, application_id, dt.datetime.fromtimestamp(minute * 60, tz=dt.UTC))
        except DatabaseError as error:
            with self._lock:
                if self._written.get(key) == minute:
                    del self._written[key]  # the next call tries again
            logger.warning("last use of application %s not recorded: %s", application_id, type(error).__name__)

    def forget(self) -> None:
        with self._lock:
            self._written.clear()


def record_use(user_id: int, application_id: int, when: dt.datetime) -> None:
    """Move the row's minute forward to ``when`` (never back: another process may have
    written a later one), making it the first time."""
    updated = ClientUse.objects.filter(user_id=user_id, application_id=application_id, last_used__lt=when).update(
        last_used=when
    )
    if updated:
        return
    if ClientUse.objects.filter(user_id=user_id, application_id=application_id).exists():
        return  # already at this minute or later
    try:
        with transaction.atomic():
            ClientUse.objects.create(user_id=user_id, application_id=application_id, last_used=when)
    except IntegrityError:
        # Another process made it meanwhile, or the application or person was deleted.
        pass


LAST_USED = LastUsed()
