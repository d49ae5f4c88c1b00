"""Values to and from the database as the ORM converts them, cheaper: results through the
same converters the ORM applies (``faster`` replaces two with equivalents), parameters
prepared as ``get_db_prep_save`` prepares them (``preparer``), and rows made into
instances as ``Model.from_db`` makes them (``ModelColumns``, ``new_instance``).
"""

import datetime as dt
import functools
import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

import orjson
from django.conf import settings
from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field, JSONField, Model
from django.db.models.base import ModelState
from django.db.models.signals import post_init, pre_init

M = TypeVar("M", bound=Model)


# JSON text with a run of 19 or more digits may hold an integer past 64 bits, which orjson
# reads as a float where the json module keeps the int: such text goes to json.
_LONG_DIGITS = re.compile(r"\d{19}").search


def faster(converter: Callable[..., Any], connection: BaseDatabaseWrapper) -> Callable[..., Any]:
    """``converter``, or a cheaper one that gives the same values.

    Two are replaced, each costly per value and several values per row:

    - ``JSONField``'s (with no custom decoder) on every backend: the text is read with
      orjson, faster than the json module. What orjson refuses (NaN,
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
    the work), and a save writes about 40 fields. For the plain
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
    walks every field and sends two signals) where it would do nothing more: a related object
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
            converters = [faster(converter, connection) for converter in converters]
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
