"""A database cache that keeps every entry until it expires, and fails closed.

The ``default`` cache holds security state: django-allauth's sign-in and second-factor throttle
counters and its marks of used TOTP codes, this server's per-address limits and the state of
clients' key-set fetches (allauth reads and writes ``django.core.cache.cache`` only, so this
must be the ``default`` alias). Django's ``DatabaseCache`` falls short of that in two ways:

- past ``MAX_ENTRIES`` rows a write culls a share of the live entries, the alphabetically first
  keys, so anyone who can make entries can wipe the throttle (allauth's keys sort first);
- a write that the database refuses is dropped silently (``set`` returns nothing and ``add``
  answers False on any database error), so a counter that cannot be written lets the next
  attempt through as if it were the first.

``DurableDatabaseCache`` is Django's ``DatabaseCache`` with both changed. Past ``MAX_ENTRIES``
rows a write first deletes the *expired* rows (an expiry sweep; reads delete the expired keys
they meet, as before) and never a live one, whatever ``CULL_FREQUENCY`` says. A ``set`` the
database refuses is tried once more (a concurrent insert of the same key fails the first, and
the second updates the row that won) and then raises ``OperationalError``; an ``add`` that the
database refused for any other reason than a row already holding the key raises too. Reads
already raise. So every caller meets a storage fault as a database outage (503), never as an
empty counter. Django's internals it relies on (``_base_set``'s answer, ``_cull``, the table's
``cache_key`` column) are registered in ``common.internals``.
"""

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.db import DatabaseCache
from django.db import OperationalError, connections, router


class DurableDatabaseCache(DatabaseCache):
    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None) -> None:
        key = self.make_and_validate_key(key, version=version)
        if not self._base_set("set", key, value, timeout) and not self._base_set("set", key, value, timeout):
            raise OperationalError(f"the cache entry {key!r} could not be written")

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None) -> bool:
        key = self.make_and_validate_key(key, version=version)
        if self._base_set("add", key, value, timeout):
            return True
        # Django answers False both when a row holds the key and when the write failed.
        if self._holds(key):
            return False
        raise OperationalError(f"the cache entry {key!r} could not be written")

    def _holds(self, key: str) -> bool:
        """Whether any row holds ``key`` (an expired one too: ``add`` replaces only rows that
        expired before the current second)."""
        connection = connections[router.db_for_read(self.cache_model_class)]
        quote_name = connection.ops.quote_name
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {quote_name(self._table)} WHERE {quote_name('cache_key')} = %s",
                [key],
            )
            return cursor.fetchone() is not None

    def _cull(self, db, cursor, now, num) -> None:
        # The expiry sweep: only rows whose time has passed. Never a live one, never clear().
        connection = connections[db]
        cursor.execute(
            f"DELETE FROM {connection.ops.quote_name(self._table)} WHERE {connection.ops.quote_name('expires')} < %s",
            [connection.ops.adapt_datetimefield_value(now)],
        )
