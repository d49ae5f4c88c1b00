"""The quota charge as one statement built once per database (``notebook.quotas.charge``)."""

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper

from notebook.models import Codex
from notebook.sql.cache import PerDatabase
from notebook.sql.driver import fetchone, run


class ChargeUsage(PerDatabase):
    """``Codex.objects.filter(pk=..., stored_bytes__lte=..., entry_count__lte=...).update(
    entry_count=F("entry_count") + entries, stored_bytes=F("stored_bytes") + stored_bytes,
    last_write_seq=F("last_write_seq") + 1)``, returning the new ``last_write_seq``: it runs
    inside every write's lock, where compiling the update cost more than running it."""

    def build(self, connection: BaseDatabaseWrapper) -> str:
        quote = connection.ops.quote_name
        meta = Codex._meta
        entry_count, stored, seq = (
            quote(meta.get_field(name).column) for name in ("entry_count", "stored_bytes", "last_write_seq")
        )
        return (
            f"UPDATE {quote(meta.db_table)} SET {entry_count} = {entry_count} + %s, {stored} = {stored} + %s,"
            f" {seq} = {seq} + 1"
            f" WHERE {quote(meta.pk.column)} = %s AND {stored} <= %s AND {entry_count} <= %s RETURNING {seq}"
        )

    def charge(
        self, *, codex_id: int, entries: int, stored_bytes: int, stored_upto: int, entries_upto: int
    ) -> int | None:
        """Add the usage where the codex's stored bytes and entry count are at most the bounds
        given; the codex's new write number, or None if a bound refused it."""
        alias = router.db_for_write(Codex)
        params = [entries, stored_bytes, codex_id, stored_upto, entries_upto]
        charged = run(connections[alias], self.built(alias), params, fetchone)
        return None if charged is None else charged[0]
