"""Point reads by key, as SQL built once per query shape instead of compiled per call.

Compiling a queryset costs far more than SQLite (or PostgreSQL) spends answering a
lookup by primary key: on the tool-call hot path the ORM's compiler was most of a
``get``. ``KeyedRead`` builds the statement once per database from the model's
metadata (so table and column names, quoting and ``FOR UPDATE`` stay the backend's),
prepares parameters with the fields' own ``get_db_prep_value``, applies the same
converters the ORM applies to results, and hands back instances made by
``Model.from_db``, exactly what the equivalent queryset returns. ``Insert`` and
``UpdateRow`` do the same for writes. Where Django's own layers cost more than the work
(a datetime or JSON column read or written), ``_faster`` and ``preparer`` do that work
directly for the plain values the notebook stores, with Django's code as the fallback.
"""

import datetime as dt
import functools
import json
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

import orjson
from django.conf import settings
from django.db import connections, models, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field, JSONField, Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

M = TypeVar("M", bound=Model)
T = TypeVar("T")


@functools.lru_cache(maxsize=512)
def _driver_sql(sql: str) -> str:
    """``sql`` in the SQLite driver's parameter style, converted as Django's SQLite cursor
    converts it on every call (``SQLiteCursorWrapper.convert_query``)."""
    from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX

    return FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")


def run(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any], result: Callable[[Any], T]) -> T:
    """``with connection.cursor() as cursor: cursor.execute(sql, params); return result(cursor)``.

    On SQLite, while nothing watches Django's cursor layers (no execute wrappers, no query
    log: ``assertNumQueries``, ``DEBUG`` and the debug toolbar see every statement), the
    statement goes straight to the driver with the checks Django's cursor makes first
    (health check, connection, thread sharing, no broken transaction) and its error
    wrapping (``IntegrityError`` stays Django's). Django's cursor costs about 10 µs per
    statement in layers and a regular expression; a save runs five of these statements.
    """
    if connection.vendor != "sqlite" or connection.execute_wrappers or connection.queries_logged:
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return result(cursor)
    connection.close_if_health_check_failed()
    if connection.connection is None:
        connection.ensure_connection()
    connection.validate_thread_sharing()
    connection.validate_no_broken_transaction()
    with connection.wrap_database_errors:
        cursor = connection.connection.cursor()
        try:
            cursor.execute(_driver_sql(sql), params)
            return result(cursor)
        finally:
            cursor.close()


def fetchone(cursor: Any) -> Any:
    return cursor.fetchone()


def fetchall(cursor: Any) -> list[Any]:
    return cursor.fetchall()


def rowcount(cursor: Any) -> int:
    return cursor.rowcount


def nothing(cursor: Any) -> None:
    return None


# JSON text with a run of 19 or more digits may hold an integer past 64 bits, which orjson
# reads as a float where the json module keeps the int: such text goes to json.
_LONG_DIGITS = re.compile(r"\d{19}").search


def _faster(converter: Callable[..., Any], connection: BaseDatabaseWrapper) -> Callable[..., Any]:
    """``converter``, or a cheaper one that gives the same values.

    Two are replaced, each a few microseconds per value and several values per row:

    - ``JSONField``'s (with no custom decoder) on every backend: the text is read with
      orjson, several times faster than the json module. What orjson refuses (NaN,
      numbers beyond a float, lone surrogates, malformed text) and text that may hold an
      integer past 64 bits goes to the field's own converter.
    - SQLite's ``DateTimeField`` converter with ``USE_TZ``, which looks ``USE_TZ`` up in the
      settings and checks the time zone through two helpers each time. The driver hands
      over a naive datetime (Django registers a converter for the column type) or, for
      other expressions, the stored text (naive UTC, as Django writes it), parsed as
      ``parse_datetime`` first tries; either is made aware in the connection's time zone,
      as ``make_aware`` does. Anything else goes to Django's converter itself.
    """
    if getattr(converter, "__func__", None) is JSONField.from_db_value and converter.__self__.decoder is None:
        return _json_converter(converter)
    if connection.vendor != "sqlite" or not settings.USE_TZ:
        return converter
    if getattr(converter, "__func__", None) is not type(connection.ops).convert_datetimefield_value:
        return converter
    zone = connection.timezone
    parse = dt.datetime.fromisoformat

    def convert_datetimefield_value(value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        kind = type(value)
        if kind is dt.datetime:
            return value.replace(tzinfo=zone) if value.tzinfo is None else value
        if kind is str:
            try:
                parsed = parse(value)
            except ValueError:
                return converter(value, expression, connection)
            return parsed.replace(tzinfo=zone) if parsed.tzinfo is None else parsed
        return converter(value, expression, connection)

    return convert_datetimefield_value


def _json_converter(converter: Callable[..., Any]) -> Callable[..., Any]:
    def from_db_value(value: Any, expression: Any, connection: BaseDatabaseWrapper) -> Any:
        if type(value) is str and _LONG_DIGITS(value) is None:
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        return converter(value, expression, connection)

    return from_db_value


# Integer fields whose preparation is ``int(value)`` then the backend's integer adaptation.
_INTEGER_FIELDS = (
    models.IntegerField,
    models.BigIntegerField,
    models.SmallIntegerField,
    models.PositiveIntegerField,
    models.PositiveBigIntegerField,
    models.PositiveSmallIntegerField,
)


def preparer(field: Field, connection: BaseDatabaseWrapper) -> Callable[[Any], Any]:
    """``field.get_db_prep_save`` on ``connection``, or a cheaper function that gives the same.

    Django prepares a value through three or four layers per field (each asking the value
    for ``as_sql`` or ``resolve_expression``, failing attribute lookups that cost more than
    the work): 5 to 20 microseconds per field, and a save writes about 40. For the plain
    values the services write (``str``, ``int``, ``UUID``, aware ``datetime``, a JSON list or
    object), fields of exactly Django's own classes on backends that keep Django's own
    adaptation are prepared directly as those layers would; anything else goes through
    ``get_db_prep_save`` itself.
    """
    slow = functools.partial(field.get_db_prep_save, connection=connection)
    kind = type(field)
    ops = type(connection.ops)
    if kind in (models.CharField, models.TextField):
        return lambda value: value if type(value) is str else slow(value)
    integer = kind in _INTEGER_FIELDS and (
        ops.adapt_integerfield_value is BaseDatabaseOperations.adapt_integerfield_value
    )
    # An auto field prepares as ``int(value)`` then the backend's check of an auto key.
    auto = kind in (models.AutoField, models.BigAutoField) and (
        ops.validate_autopk_value is BaseDatabaseOperations.validate_autopk_value
    )
    if integer or auto:
        return lambda value: value if type(value) is int else slow(value)
    if kind is models.UUIDField:
        if connection.features.has_native_uuid_field:
            return lambda value: value if type(value) is uuid.UUID else slow(value)
        return lambda value: value.hex if type(value) is uuid.UUID else slow(value)
    if kind in (models.ForeignKey, models.OneToOneField):
        target = preparer(field.target_field, connection)
        # None and "" are the foreign key's own cases; any other value is the target's.
        return lambda value: target(value) if type(value) in (int, uuid.UUID) else slow(value)
    if (
        kind is models.JSONField
        and field.encoder is None
        and ops.adapt_json_value is BaseDatabaseOperations.adapt_json_value
    ):
        return lambda value: json.dumps(value) if type(value) in (list, dict) else slow(value)
    if kind is models.DateTimeField and connection.vendor == "sqlite" and settings.USE_TZ:
        # Imported here: the module needs the SQLite backend loaded first.
        from django.db.backends.sqlite3.operations import DatabaseOperations as SQLiteOperations

        if ops.adapt_datetimefield_value is not SQLiteOperations.adapt_datetimefield_value:
            return slow
        zone = connection.timezone
        # timezone.make_naive in the connection's zone, then str(), as SQLite's adapter does.
        return lambda value: (
            str(value.astimezone(zone).replace(tzinfo=None))
            if type(value) is dt.datetime and value.utcoffset() is not None
            else slow(value)
        )
    return slow


def _plain_init(model: type[Model]) -> bool:
    """Whether making an instance of ``model`` needs nothing of ``Model.__init__`` but its
    fields' values: Django's ``__init__``, no pre_init or post_init receiver (checked when
    asked, so a receiver connected later is still honoured)."""
    return model.__init__ is Model.__init__ and not pre_init.has_listeners(model) and not post_init.has_listeners(model)


@functools.cache
def _fields_to_set(model: type[Model]) -> tuple[Field, ...] | None:
    """The fields ``Model.__init__`` sets from keyword arguments, or None if it does more
    for this model (fields without a column, or generated ones) than ``new_instance`` repeats."""
    fields = model._meta.fields
    if any(field.column is None or field.generated for field in fields):
        return None
    return tuple(fields)


def new_instance(model: type[M], **values: Any) -> M:
    """``model(**values)``: a new, unsaved instance, each field given by attname (a related
    object by the field's name) or taking its default. Without ``Model.__init__`` (which
    costs a save about 35 µs for an entry) where it would do nothing more: a related object
    still goes through its descriptor, as in ``__init__``."""
    fields = _fields_to_set(model)
    if fields is None or not _plain_init(model):
        return model(**values)
    instance = model.__new__(model)
    instance._state = ModelState()
    attributes = instance.__dict__
    used = 0
    for field in fields:
        if field.is_relation and field.name in values:
            setattr(instance, field.name, values[field.name])
            used += 1
        elif field.attname in values:
            attributes[field.attname] = values[field.attname]
            used += 1
        else:
            attributes[field.attname] = field.get_default()
    if used != len(values):
        return model(**values)  # an unexpected keyword: let Django's __init__ say which
    return instance


class ModelColumns(Generic[M]):
    """Some concrete fields of a model, selected under a table alias, and how to turn
    their raw values into an instance."""

    def __init__(self, model: type[M], table: str, connection: BaseDatabaseWrapper, names: Sequence[str] = ()) -> None:
        self.model = model
        self.fields: list[Field] = (
            [model._meta.get_field(name) for name in names] if names else list(model._meta.concrete_fields)
        )
        self.attnames = [field.attname for field in self.fields]
        quote = connection.ops.quote_name
        self.sql = [f"{table}.{quote(field.column)}" for field in self.fields]
        # (position, expression, converters) of each column that has converters, as
        # SQLCompiler.get_converters lists them (the others are taken as they come).
        self.converters = []
        for position, field in enumerate(self.fields):
            column = field.get_col(table)
            converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
            converters = [_faster(converter, connection) for converter in converters]
            if converters:
                self.converters.append((position, column, converters))

    def __len__(self) -> int:
        return len(self.fields)

    def convert(self, values: Sequence[Any], connection: BaseDatabaseWrapper) -> list[Any]:
        if len(values) != len(self.fields):
            raise ValueError(f"{len(values)} values for {len(self.fields)} columns")
        converted = list(values)
        for position, column, converters in self.converters:
            value = converted[position]
            for converter in converters:
                value = converter(value, column, connection)
            converted[position] = value
        return converted

    def instance(self, values: Sequence[Any], connection: BaseDatabaseWrapper) -> M | None:
        """The instance these raw values describe; None if its first column (the key) is NULL."""
        if values[0] is None:
            return None
        return self.loaded(values, connection, direct=self.loads_directly())

    def loads_directly(self) -> bool:
        """Whether ``loaded`` may skip ``Model.__init__``: the model keeps Django's
        ``from_db`` and ``__init__``, and nothing listens to its pre_init and post_init
        signals (checked when asked, so a receiver connected later is still honoured)."""
        return getattr(self.model.from_db, "__func__", None) is Model.from_db.__func__ and _plain_init(self.model)

    def loaded(self, values: Sequence[Any], connection: BaseDatabaseWrapper, *, direct: bool) -> M:
        """The instance these raw values (with a key) describe, as ``Model.from_db`` makes it.

        ``direct`` (when ``loads_directly()``): without ``Model.__init__``, which for each
        row sends two signals nobody receives and walks every field to set what is
        already known. The result is the same: a ``_state`` (not adding, this database),
        each selected field's value in ``__dict__`` under its attname (as ``setattr``
        leaves it on a fresh instance, descriptors included), the rest deferred.
        """
        converted = self.convert(values, connection)
        if not direct:
            return self.model.from_db(connection.alias, self.attnames, converted)
        instance = self.model.__new__(self.model)
        state = instance._state = ModelState()
        state.adding = False
        state.db = connection.alias
        instance.__dict__.update(zip(self.attnames, converted, strict=True))
        return instance


class KeyedRead(Generic[M]):
    """``Model.objects.filter(k1=v1, k2=v2).first()`` without compiling a queryset per call
    (``lock=True`` adds ``FOR UPDATE`` where the backend has it, like ``select_for_update``).
    The keys should name a unique row (the primary key, with the codex beside it)."""

    def __init__(self, model: type[M], keys: Sequence[str], *, lock: bool = False) -> None:
        self.model = model
        self.keys = list(keys)
        self.lock = lock
        self._built: dict[str, tuple[str, ModelColumns[M], list[Field]]] = {}

    def _build(self, alias: str) -> tuple[str, ModelColumns[M], list[Field]]:
        connection = connections[alias]
        quote = connection.ops.quote_name
        table = quote(self.model._meta.db_table)
        columns = ModelColumns(self.model, table, connection)
        key_fields = [self.model._meta.get_field(name) for name in self.keys]
        where = " AND ".join(f"{table}.{quote(field.column)} = %s" for field in key_fields)
        sql = f"SELECT {', '.join(columns.sql)} FROM {table} WHERE {where} LIMIT 1"
        if self.lock and connection.features.has_select_for_update:
            sql += " FOR UPDATE"
        return sql, columns, key_fields

    def first(self, *values: Any) -> M | None:
        """The row whose keys equal ``values`` (in the order of ``keys``), or None."""
        alias = router.db_for_write(self.model) if self.lock else router.db_for_read(self.model)
        built = self._built.get(alias)
        if built is None:
            built = self._built[alias] = self._build(alias)
        sql, columns, key_fields = built
        connection = connections[alias]
        params = [field.get_db_prep_value(value, connection) for field, value in zip(key_fields, values, strict=True)]
        row = run(connection, sql, params, fetchone)
        return None if row is None else columns.instance(row, connection)


class PerDatabase:
    """Statements built once per database alias: ``build`` runs on first use of an alias."""

    def __init__(self) -> None:
        self._built: dict[str, Any] = {}

    def built(self, alias: str) -> Any:
        built = self._built.get(alias)
        if built is None:
            built = self._built[alias] = self.build(connections[alias])
        return built

    def build(self, connection: BaseDatabaseWrapper) -> Any:
        raise NotImplementedError


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
