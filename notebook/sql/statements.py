"""Point reads by key and row writes, as SQL built once per database instead of compiled per call.

Compiling a queryset costs far more than SQLite (or PostgreSQL) spends answering a
lookup by primary key: on the tool-call hot path the ORM's compiler was most of a
``get``. ``KeyedRead`` builds the statement once per database from the model's
metadata (so table and column names, quoting and ``FOR UPDATE`` stay the backend's),
prepares parameters with the fields' own ``get_db_prep_value``, applies the same
converters the ORM applies to results, and hands back instances made by
``Model.from_db``, exactly what the equivalent queryset returns. ``Insert`` and
``UpdateRow`` do the same for writes. Where Django's own layers cost more than the work
(a datetime or JSON column read or written), ``converters.faster`` and ``preparer`` do that work
directly for the plain values the notebook stores, with Django's code as the fallback.
"""

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

from notebook.sql.cache import PerDatabase
from notebook.sql.converters import ModelColumns, preparer
from notebook.sql.driver import fetchone, nothing, rowcount, run

M = TypeVar("M", bound=Model)


class KeyedRead(PerDatabase, Generic[M]):
    """``Model.objects.filter(k1=v1, k2=v2).first()`` without compiling a queryset per call
    (``lock=True`` adds ``FOR UPDATE`` where the backend has it, like ``select_for_update``).
    The keys should name a unique row (the primary key, with the codex beside it)."""

    def __init__(self, model: type[M], keys: Sequence[str], *, lock: bool = False) -> None:
        super().__init__()
        self.model = model
        self.keys = list(keys)
        self.lock = lock

    def build(self, connection: BaseDatabaseWrapper) -> tuple[str, ModelColumns[M], list[Field]]:
        table = connection.ops.quote_name(self.model._meta.db_table)
        columns = ModelColumns(self.model, table, connection)
        where, key_fields = self._conditions(connection, table, {})
        sql = f"SELECT {', '.join(columns.sql)} FROM {table} WHERE {where} LIMIT 1"
        if self.lock and connection.features.has_select_for_update:
            sql += " FOR UPDATE"
        return sql, columns, key_fields

    def joined(
        self, connection: BaseDatabaseWrapper, table: str, given: Mapping[str, str]
    ) -> tuple[str, ModelColumns[M], list[Field]]:
        """This read as a ``LEFT JOIN`` of another statement, under the name ``table``: the keys
        in ``given`` equal that statement's SQL expressions, the others are parameters (in the
        order of ``keys``). Its columns are all NULL where no row matches (``instance`` gives
        None)."""
        columns = ModelColumns(self.model, table, connection)
        on, parameters = self._conditions(connection, table, given)
        return f"LEFT JOIN {connection.ops.quote_name(self.model._meta.db_table)} {table} ON {on}", columns, parameters

    def _conditions(
        self, connection: BaseDatabaseWrapper, table: str, given: Mapping[str, str]
    ) -> tuple[str, list[Field]]:
        """``table``'s keys equal to ``given``'s SQL or, for the others, to parameters: the
        condition, and the fields of its parameters in the order of ``keys``."""
        quote = connection.ops.quote_name
        conditions, parameters = [], []
        for name in self.keys:
            field = self.model._meta.get_field(name)
            if name in given:
                conditions.append(f"{table}.{quote(field.column)} = {given[name]}")
            else:
                conditions.append(f"{table}.{quote(field.column)} = %s")
                parameters.append(field)
        return " AND ".join(conditions), parameters

    def first(self, *values: Any) -> M | None:
        """The row whose keys equal ``values`` (in the order of ``keys``), or None."""
        alias = router.db_for_write(self.model) if self.lock else router.db_for_read(self.model)
        sql, columns, key_fields = self.built(alias)
        connection = connections[alias]
        params = [field.get_db_prep_value(value, connection) for field, value in zip(key_fields, values, strict=True)]
        row = run(connection, sql, params, fetchone)
        return None if row is None else columns.instance(row, connection)


class Insert(PerDatabase, Generic[M]):
    """``obj.save(force_insert=True)`` / ``bulk_create(objs)`` without compiling an insert
    per call: one ``INSERT ... VALUES`` for all ``objs``. Values are prepared as the ORM
    prepares them (``pre_save`` then ``get_db_prep_save``); an auto primary key is left to
    the database and not read back, so use it where nothing needs that key.

    ``values`` takes the rows as plain ``{attname: value}`` mappings instead, for rows
    nothing reads back: no model instance is built for them (``Model.__init__`` costs more
    than preparing its values)."""

    def __init__(self, model: type[M]) -> None:
        super().__init__()
        self.model = model

    def build(self, connection: BaseDatabaseWrapper) -> tuple[str, list[Field], list[Callable[[Any], Any]]]:
        quote = connection.ops.quote_name
        meta = self.model._meta
        fields = [field for field in meta.local_concrete_fields if field is not meta.auto_field]
        columns = ", ".join(quote(field.column) for field in fields)
        prepare = [preparer(field, connection) for field in fields]
        return f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ", fields, prepare

    def rows(self, objs: Sequence[M]) -> None:
        if not objs:
            return
        alias = router.db_for_write(self.model)
        _, fields, prepare = self.built(alias)
        params = []
        for obj in objs:
            params.extend(prep(field.pre_save(obj, True)) for field, prep in zip(fields, prepare, strict=True))
            obj._state.adding = False
            obj._state.db = alias
        self._execute(alias, len(objs), params)

    def values(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert rows given by attname (``entry_id``, not ``entry``). Every column but an
        auto primary key must be given: nothing is filled in (no defaults, no ``auto_now``)."""
        if not rows:
            return
        alias = router.db_for_write(self.model)
        _, fields, prepare = self.built(alias)
        params = []
        for row in rows:
            params.extend(prep(row[field.attname]) for field, prep in zip(fields, prepare, strict=True))
        self._execute(alias, len(rows), params)

    def _execute(self, alias: str, count: int, params: list[Any]) -> None:
        head, fields, _ = self.built(alias)
        one = "(" + ", ".join(["%s"] * len(fields)) + ")"
        run(connections[alias], head + ", ".join([one] * count), params, nothing)


class UpdateRow(PerDatabase, Generic[M]):
    """``Model.objects.filter(k1=..., k2=...).update(every other concrete field from obj)``,
    built once; returns the number of rows changed."""

    def __init__(self, model: type[M], keys: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.keys = list(keys)

    def build(
        self, connection: BaseDatabaseWrapper
    ) -> tuple[str, list[Field], list[Callable[[Any], Any]], list[Field]]:
        quote = connection.ops.quote_name
        meta = self.model._meta
        key_fields = [meta.get_field(name) for name in self.keys]
        fields = [field for field in meta.concrete_fields if field not in key_fields and not field.primary_key]
        assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
        where = " AND ".join(f"{quote(field.column)} = %s" for field in key_fields)
        prepare = [preparer(field, connection) for field in fields]
        return f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {where}", fields, prepare, key_fields

    def row(self, obj: M) -> int:
        alias = router.db_for_write(self.model)
        connection = connections[alias]
        sql, fields, prepare, key_fields = self.built(alias)
        params = [prep(getattr(obj, field.attname)) for field, prep in zip(fields, prepare, strict=True)]
        params += [field.get_db_prep_value(getattr(obj, field.attname), connection) for field in key_fields]
        return run(connection, sql, params, rowcount)
