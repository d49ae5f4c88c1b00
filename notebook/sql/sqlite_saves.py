"""A save on SQLite: its statements prepared before the write queue, sent back to back in it.

SQLite has one writer at a time, so a save's time inside the write queue
(``notebook.transactions.write_transaction``) is time every other writer of the process
waits, and every bit of Python in it competes for the interpreter with the event loop and
the other calls. So everything a save sends is made ready before it joins the queue: the
statements (built once per database, as ``notebook.sql.statements`` builds them) and
every parameter, prepared as the ORM prepares it. In the queue only the statements run,
on one driver cursor with Django's checks made once: the quota charge first (a refused
charge writes nothing), then the entry, its request key, revision 1 and its index rows. The
one value not known before is the entry's write number, which the charge returns; it is put
into the entry's parameters then.

The guarantees are the services' own (``services.entry_save``): the charge is the first
statement of the transaction, and a request id already used fails the request key's
insert with ``IntegrityError``, which rolls the whole transaction back.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from django.db import connections, router
from django.db.models import Model

from notebook.models import Entry
from notebook.sql.driver import sqlite_statements
from notebook.sql.statements import Insert
from notebook.sql.usage import ChargeUsage


class PreparedSave:
    """One save's statements and parameters, ready to run in its write transaction
    (``__call__``: the entry's write number, or None if the charge was refused)."""

    def __init__(
        self,
        entry: Entry,
        rows: Sequence[tuple[type[Model], Sequence[Mapping[str, Any]]]],
        *,
        charge: Mapping[str, int],
        inserts: Mapping[type[Model], Insert],
        charge_statement: ChargeUsage,
    ) -> None:
        self.alias = router.db_for_write(Entry)
        self.entry = entry
        self.charge_sql = charge_statement.built(self.alias)
        self.charge_params = [
            charge["entries"],
            charge["stored_bytes"],
            entry.codex_id,
            charge["stored_upto"],
            charge["entries_upto"],
        ]
        entry_insert = inserts[Entry]
        _, fields, prepare = entry_insert.built(self.alias)
        # The write number's place among the entry's parameters, and its preparer.
        (self.seq_at,) = [index for index, field in enumerate(fields) if field.attname == "write_seq"]
        self.seq_prepare: Callable[[Any], Any] = prepare[self.seq_at]
        self.statements = [(entry_insert.sql(self.alias, 1), entry_insert.rows_params(self.alias, [entry]))]
        self.statements += [
            (inserts[model].sql(self.alias, len(values)), inserts[model].values_params(self.alias, values))
            for model, values in rows
            if values
        ]

    def __call__(self) -> int | None:
        connection = connections[self.alias]
        with sqlite_statements(connection) as execute:
            charged = execute(self.charge_sql, self.charge_params).fetchone()
            if charged is None:
                return None
            write_seq = self.entry.write_seq = charged[0]
            self.statements[0][1][self.seq_at] = self.seq_prepare(write_seq)
            for sql, params in self.statements:
                execute(sql, params)
        return write_seq
