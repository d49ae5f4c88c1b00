"""Counters of attempts in fixed windows of time, exact under concurrency: what bounds the password
hashes a stranger can make the server compute (``authserver.clients.authentication``).

A counter is a name and a limit; its count lives in one row per window
(``authserver.models.AttemptCount``). ``attempt_reserve`` takes one unit of every counter it is
given, before the work it bounds, with a conditional ``UPDATE ... WHERE count < limit`` per
counter in one transaction: concurrent attempts queue on each row's lock, so however many arrive
at once, no more than ``limit`` of them are let through in a window, and a refused one takes
nothing. ``attempt_return`` gives the units back (an attempt that succeeded is not a failure);
``attempt_record`` adds one unit without a limit, and ``attempt_count`` reads a counter.

The rows live in the database, like the spent JWTs (``authserver.core.replay``): no flood of
anything else evicts one before its window ends, and a database that cannot be read or written
raises (the request is refused as an outage), never passes as an empty count. A row outlives its
window by nothing: each reservation sweeps a few whose window ended.
"""

import datetime as dt
import hashlib
import time
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F

from authserver.models import AttemptCount

# Rows of ended windows deleted by each reservation: more than the few a reservation adds.
SWEPT_PER_RESERVATION = 32

clock = time.time
"""What the windows are read from (a test stands a still clock here)."""


@dataclass(frozen=True)
class Counter:
    name: str  # what is counted, e.g. "client-auth:network:203.0.113.9"
    limit: int


@dataclass(frozen=True)
class Window:
    """One window of ``seconds``: the one ``now`` falls in."""

    start: int
    seconds: int

    @classmethod
    def of(cls, seconds: int, now: float | None = None) -> "Window":
        moment = int(clock() if now is None else now)
        return cls(moment // seconds * seconds, seconds)

    @property
    def ends_at(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.start + self.seconds, tz=dt.UTC)

    def seconds_left(self) -> int:
        return max(1, self.start + self.seconds - int(clock()))

    def key(self, name: str) -> str:
        text = f"{name}\x00{self.start}\x00{self.seconds}"
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Exhausted(Exception):
    """A counter was at its limit: nothing was reserved."""

    def __init__(self, counter: Counter, window: Window) -> None:
        super().__init__(counter.name)
        self.counter = counter
        self.window = window


@dataclass(frozen=True)
class Reservation:
    """The units one attempt took, to give back (``attempt_return``) if it succeeds."""

    keys: tuple[str, ...]


def _ensure_row(key: str, window: Window) -> None:
    # Insert first (a row already there is left as it is): every counter then has its row to update.
    AttemptCount.objects.bulk_create([AttemptCount(key=key, count=0, expires_at=window.ends_at)], ignore_conflicts=True)


def attempt_reserve(*, counters: list[Counter], window: Window) -> Reservation:
    """Take one unit of each counter in ``window``; ``Exhausted`` (naming the first counter at its
    limit) and nothing taken when any is full. Concurrent reservations of a counter queue on its
    row: at most ``limit`` succeed in a window, whatever their number."""
    keys = tuple(window.key(counter.name) for counter in counters)
    with transaction.atomic():
        for key, counter in zip(keys, counters, strict=True):
            _ensure_row(key, window)
            # The one statement that decides: the row's lock orders concurrent attempts.
            taken = AttemptCount.objects.filter(key=key, count__lt=counter.limit).update(count=F("count") + 1)
            if not taken:
                raise Exhausted(counter, window)  # leaving the block rolls back the units taken before
    _sweep()
    return Reservation(keys)


def attempt_return(reservation: Reservation) -> None:
    """Give back what ``reservation`` took: the attempt succeeded."""
    AttemptCount.objects.filter(key__in=reservation.keys, count__gt=0).update(count=F("count") - 1)


def attempt_record(*, name: str, window: Window) -> None:
    """Add one unit to the counter ``name`` in ``window``, whatever it holds."""
    key = window.key(name)
    with transaction.atomic():
        _ensure_row(key, window)
        AttemptCount.objects.filter(key=key).update(count=F("count") + 1)


def attempt_count(*, name: str, window: Window) -> int:
    """The units the counter ``name`` holds in ``window``."""
    return AttemptCount.objects.filter(key=window.key(name)).values_list("count", flat=True).first() or 0


def _sweep() -> None:
    now = dt.datetime.fromtimestamp(clock(), tz=dt.UTC)
    ended = AttemptCount.objects.filter(expires_at__lte=now).order_by("expires_at").values("pk")[:SWEPT_PER_RESERVATION]
    AttemptCount.objects.filter(pk__in=ended).delete()
