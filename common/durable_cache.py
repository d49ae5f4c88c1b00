"""A database cache that keeps every entry until it expires, fails closed, and costs a write the
same however many rows a flood left in it.

The ``default`` cache holds security state: django-allauth's sign-in and second-factor throttle
counters and its marks of used TOTP codes, this server's per-network limits and the state of
clients' key-set fetches (allauth reads and writes ``django.core.cache.cache`` only, so this
must be the ``default`` alias). Django's ``DatabaseCache`` falls short of that in three ways:

- past ``MAX_ENTRIES`` rows a write culls a share of the live entries, the alphabetically first
  keys, so anyone who can make entries can wipe the throttle (allauth's keys sort first);
- a write that the database refuses is dropped silently (``set`` returns nothing and ``add``
  answers False on any database error), so a counter that cannot be written lets the next
  attempt through as if it were the first;
- every write counts the whole table first (``SELECT COUNT(*)``), to decide whether to cull: on a
  table a flood of strangers has filled, every sign-in's writes pay for every row.

``DurableDatabaseCache`` is Django's ``DatabaseCache`` (its reads, its deletes, its table and its
encoding of values) with the writes made here, one statement each: ``set`` an upsert, ``add`` an
insert that takes the place of an expired row only, ``touch`` an update, and ``incr`` a
compare-and-set that keeps the entry's expiry. (Django's ``incr`` is a ``get`` and then a
``set``: two workers counting at once would both read one count and both write it plus one, and
every rate limit counts through it; its ``set`` also gives the entry the cache's default timeout,
five minutes, whatever the counter's window.) A write the database
refuses raises ``OperationalError``, so every caller meets a storage fault as a database outage
(503), never as an empty counter; reads already raise. No live row is ever deleted: expired rows
are swept by a write at most every ``SWEEP_SECONDS`` per process, whatever the table holds (reads
delete the expired keys they meet, as Django's do), so the table holds the live entries and the
last few seconds' expired ones.

**At its bound.** ``MAX_ENTRIES`` is the size past which the table is not what it should be: each
sweep that finds more live rows than that says so in one WARNING line. Nothing is evicted and
nothing refused there: evicting would let strangers wipe a throttle, and refusing would let
strangers who filled the table lock everyone out. What bounds the table instead is what each
stranger can put in it (``docs/architecture.md``, "Security state"): a few counters per client
network and window, the failed sign-ins a network's own limit lets through, and the key-set state
of the clients it made under its limits, each gone within its window.
"""

import base64
import logging
import pickle
import threading
import time
from datetime import UTC, datetime

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache
from django.db import DatabaseError, OperationalError, connections, router, transaction
from django.utils.timezone import now as tz_now

logger = logging.getLogger(__name__)

# How often a process's writes sweep the expired rows out: a sweep is one indexed DELETE of the
# rows whose time has passed (and one count of what is left, for the WARNING past MAX_ENTRIES).
SWEEP_SECONDS = 10
# An incr whose compare-and-set lost this many times in a row to other writers of the same key
# raises (a 503) rather than spin: each loss is another writer's success, so only a key written
# by this many others at once, again and again, comes near it.
INCR_ATTEMPTS = 1000

_sweeps_lock = threading.Lock()
_swept_at: dict[str, float] = {}  # table: when this process last swept it (time.monotonic)


def forget_sweeps() -> None:
    """Make the next write of each table sweep it (for tests that move the sweep's clock)."""
    with _sweeps_lock:
        _swept_at.clear()


class DurableDatabaseCache(DatabaseCache):
    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None) -> None:
        key = self.make_and_validate_key(key, version=version)
        self._write(key, "upsert", value=value, timeout=timeout)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self._write(key, "add", value=value, timeout=timeout)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        return self._write(key, "touch", timeout=timeout)

    def incr(self, key, delta=1, version=None):
        """The value at ``key`` plus ``delta``, written and returned; ``ValueError`` when no live
        entry holds ``key`` (as Django's). Atomic on every database: the new value is written
        only where the row still holds the value it was computed from (``UPDATE ... WHERE value =
        <read>``, in one transaction with the read), else it is read again. On SQLite the
        transaction holds the write lock from its start (``transaction_mode`` IMMEDIATE), so the
        first attempt wins; on PostgreSQL a concurrent writer's commit makes the update match
        nothing, and the next attempt reads its count. The entry keeps its expiry."""
        key = self.make_and_validate_key(key, version=version)
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        table, key_column, value_column, expires_column = self._columns(connection)
        read = f"SELECT {value_column} FROM {table} WHERE {key_column} = %s AND {expires_column} >= %s"
        write = f"UPDATE {table} SET {value_column} = %s WHERE {key_column} = %s AND {value_column} = %s"
        try:
            for _ in range(INCR_ATTEMPTS):
                with transaction.atomic(using=db), connection.cursor() as cursor:
                    now = tz_now().replace(microsecond=0)
                    self._sweep_when_due(cursor, connection, now)
                    cursor.execute(read, [key, connection.ops.adapt_datetimefield_value(now)])
                    row = cursor.fetchone()
                    if row is None:
                        raise ValueError(f"Key '{key}' not found")
                    stored = row[0]
                    value = pickle.loads(base64.b64decode(stored.encode())) + delta
                    cursor.execute(write, [self._encoded(value), key, stored])
                    if cursor.rowcount > 0:
                        return value
        except DatabaseError as error:
            raise OperationalError(f"the cache entry {key!r} could not be written ({error})") from error
        raise OperationalError(f"the cache entry {key!r} could not be incremented: {INCR_ATTEMPTS} writers came first")

    async def aincr(self, key, delta=1, version=None):
        # Django's is an aget and then an aset: the same lost count as its incr.
        return await sync_to_async(self.incr)(key, delta, version)

    def _columns(self, connection) -> tuple[str, str, str, str]:
        quote = connection.ops.quote_name
        return quote(self._table), quote("cache_key"), quote("value"), quote("expires")

    def _encoded(self, value) -> str:
        # As Django's database cache keeps a value: pickled, in base64.
        return base64.b64encode(pickle.dumps(value, self.pickle_protocol)).decode("latin1")

    def _write(self, key: str, mode: str, *, timeout, value=None) -> bool:
        """One statement: whether it wrote a row (``add``: False when a live row holds the key;
        ``touch``: False when no row does). ``OperationalError`` when the database refused it."""
        db = router.db_for_write(self.cache_model_class)
        connection = connections[db]
        table, key_column, value_column, expires_column = self._columns(connection)
        # As Django's database cache keeps them: whole seconds, the value pickled in base64.
        now = tz_now().replace(microsecond=0)
        backend_timeout = self.get_backend_timeout(timeout)
        expires = (
            datetime.max
            if backend_timeout is None
            else datetime.fromtimestamp(backend_timeout, tz=UTC if settings.USE_TZ else None)
        ).replace(microsecond=0)
        expires_value = connection.ops.adapt_datetimefield_value(expires)
        if mode == "touch":
            statement = f"UPDATE {table} SET {expires_column} = %s WHERE {key_column} = %s"
            parameters = [expires_value, key]
        else:
            encoded = self._encoded(value)
            # add: a row that holds the key and has not expired stays; an expired one is replaced.
            condition = f" WHERE {table}.{expires_column} < %s" if mode == "add" else ""
            statement = (
                f"INSERT INTO {table} ({key_column}, {value_column}, {expires_column}) VALUES (%s, %s, %s) "
                f"ON CONFLICT ({key_column}) DO UPDATE SET {value_column} = excluded.{value_column}, "
                f"{expires_column} = excluded.{expires_column}{condition}"
            )
            parameters = [key, encoded, expires_value]
            if mode == "add":
                parameters.append(connection.ops.adapt_datetimefield_value(now))
        try:
            # A savepoint, so that a refused write leaves a caller's transaction usable.
            with transaction.atomic(using=db), connection.cursor() as cursor:
                self._sweep_when_due(cursor, connection, now)
                cursor.execute(statement, parameters)
                return cursor.rowcount > 0
        except DatabaseError as error:
            raise OperationalError(f"the cache entry {key!r} could not be written ({error})") from error

    def _sweep_when_due(self, cursor, connection, now: datetime) -> None:
        moment = time.monotonic()
        with _sweeps_lock:
            last = _swept_at.get(self._table)
            if last is not None and moment - last < SWEEP_SECONDS:
                return
            _swept_at[self._table] = moment
        quote = connection.ops.quote_name
        table = quote(self._table)
        cursor.execute(
            f"DELETE FROM {table} WHERE {quote('expires')} < %s", [connection.ops.adapt_datetimefield_value(now)]
        )
        cursor.execute(f"SELECT COUNT(*) FROM {table}")
        live = cursor.fetchone()[0]
        if live > self._max_entries:
            logger.warning(
                "the %s cache table holds %d live entries, past its MAX_ENTRIES of %d: nothing is evicted or "
                "refused (each entry goes when it expires); see docs/architecture.md, Security state",
                self._table,
                live,
                self._max_entries,
            )
