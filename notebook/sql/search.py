"""A search's statements as SQL built once per database and filter shape.

``notebook.selectors.entry_search`` sends one to three statements per page. Compiled
through the ORM on every call (filters, joins, ordering, then a model instance per row
with its signals), they cost more than the database spends answering them.
``SearchStatements`` renders each statement once per database alias and *shape* (which
filters it has: a cursor, an upper bound, a tag, a related agent, a writer, how a query
narrows it, whether the search columns are read), from the models' metadata and the
backend's own operations (quoting, ``StrIndex``'s INSTR or STRPOS, the ``contains``
lookup's LIKE with its escaping, ``CAST``, ``SUBSTR``), as the text the ORM sends for the same
filters, so that the plans checked with EXPLAIN stay what they were (docs/data.md).
Values are always parameters, prepared by their fields' ``get_db_prep_value``; only
LIMIT and OFFSET, integers chosen by the code, are written into the text, as the ORM
writes them. Rows become ``Entry`` instances as the queryset made them (deferred
columns, the ``excerpt`` annotation), only cheaper (``notebook.sql.converters.ModelColumns``).
``notebook.orm.search_candidates`` is the same statement as a queryset (``CODEX_FAST_PATH=0``).
"""

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BigIntegerField, Model, Value
from django.db.models.expressions import Expression
from django.db.models.functions import Cast, StrIndex, Substr
from django.db.models.sql import Query

from notebook.limits import EXCERPT_CHARS
from notebook.models import Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.prefilters import (
    LIKE,
    NEVER_READ,
    ON_THE_ROW,
    PG_BITMAP_ONLY_RESTORE,
    PG_BITMAP_ONLY_SAVE,
    PG_BITMAP_ONLY_SET,
    PG_TRIGRAM_KEYS,
    SEARCH_COLUMNS,
    SQLITE_TRIGRAM_MATCH,
    SQLITE_TRIGRAM_MATCH_AFTER,
    TRIGRAM,
    sqlite_trigram_params,
    tested_on_the_row,
)
from notebook.sql.cache import PerDatabase
from notebook.sql.converters import ModelColumns
from notebook.sql.driver import fetchall, run
from notebook.writers import APPLICATION

# Searched by a query's LIKE, each on its own (a match never spans two fields).
_LIKE_COLUMNS = ("search_title", "search_content", "search_tags_text")


@dataclass(frozen=True)
class Shape:
    """Which filters a candidate statement has: its text depends on this (and LIMIT) alone."""

    after: bool = False  # ids after a cursor
    upto: bool = False  # ids up to the walk window's end
    tag: bool = False
    agent: bool = False  # a related agent id
    written_by: bool = False  # an application wrote a revision (the person's pages)
    query: str | None = None  # None, LIKE or TRIGRAM
    search_columns: bool = False  # read the search columns (a query is tested exactly)


class _SearchSQL:
    """What every statement for one database shares, and its statements by shape."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.vendor = connection.vendor
        quote = self.quote = connection.ops.quote_name
        self.entry = quote(Entry._meta.db_table)
        self.entry_id = f"{self.entry}.{quote(Entry._meta.pk.column)}"
        self.entry_codex = f"{self.entry}.{quote(Entry._meta.get_field('codex').column)}"
        # The codex id typed bigint, like the column, as the ORM's queryset (``orm.candidates``)
        # writes it. (Migration 0002's trigram indexes, which 0009 replaced, led with the codex
        # column through btree_gin, whose operator class has no bigint = integer.)
        codex_cast = self._compile(connection, Cast(Value(0), BigIntegerField()), [0])[0]
        # Parenthesized unless it already is, as a lookup writes its right-hand side.
        self.codex_cast = codex_cast if codex_cast.startswith("(") else f"({codex_cast})"
        # SUBSTR(content, 1, 160) (SUBSTRING on PostgreSQL), with its constant parameters.
        content = Entry._meta.get_field("content")
        excerpt = Substr(content.get_col(Entry._meta.db_table), 1, EXCERPT_CHARS)
        self.excerpt_sql, self.excerpt_params = self._compile(connection, excerpt)
        self.excerpt_converters = connection.ops.get_db_converters(excerpt) + excerpt.get_db_converters(connection)
        self.excerpt_expression = excerpt
        walk, like = [], []
        for name in _LIKE_COLUMNS:
            field = Entry._meta.get_field(name)
            # The walk's test: ``StrIndex`` (INSTR; PostgreSQL: STRPOS), a plain substring
            # test, which costs less per row than LIKE's pattern matcher (which would also
            # need %, _ and \ escaped), and which no index serves: PostgreSQL's planner,
            # judging a word's frequency over the whole table, would otherwise answer a walk
            # with a bitmap scan of every match of a common word in the codex, then sort them.
            position, _ = self._compile(connection, StrIndex(field.get_col(Entry._meta.db_table), Value("")), [""])
            walk.append(f"{position} > 0")
            # PostgreSQL's trigram step: the ORM's ``contains`` lookup, which its trigram
            # indexes serve: the lhs cast (``::text``) and the operator with its ESCAPE clause.
            column = f"{self.entry}.{quote(field.column)}"
            lhs = connection.ops.lookup_cast("contains", field.get_internal_type()) % column
            like.append(f"{lhs} {connection.operators['contains'] % '%s'}")
        self.walk = "(" + " OR ".join(walk) + ")"
        self.like = "(" + " OR ".join(like) + ")"
        # Parenthesized, as the queryset writes a boolean ``RawSQL`` (``orm.candidates``).
        self.trigram_keys = f"({PG_TRIGRAM_KEYS.format(table=self.entry)})"
        # As the ``contains`` lookup prepares its value: %, _ and \ escaped.
        self.like_value: Callable[[str], str] = lambda query: f"%{connection.ops.prep_for_like_query(query)}%"
        # The ORM's column order: the model's concrete fields, less those deferred.
        self.columns = {
            search_columns: ModelColumns(
                Entry,
                self.entry,
                connection,
                [
                    field.name
                    for field in Entry._meta.concrete_fields
                    if field.name not in NEVER_READ and (search_columns or field.name not in SEARCH_COLUMNS)
                ],
            )
            for search_columns in (False, True)
        }
        self.index_tables = {model: quote(model._meta.db_table) for model in (EntryTag, EntryRelatedAgent)}
        self.index_entry = {
            model: ModelColumns(model, quote(model._meta.db_table), connection, ("entry",))
            for model in (EntryTag, EntryRelatedAgent)
        }
        self.entry_ids = ModelColumns(Entry, self.entry, connection, ("id",))
        self.statements: dict[Shape, tuple[str, tuple[str, ...], ModelColumns[Entry]]] = {}
        self.windows: dict[tuple[type[Model], bool], tuple[str, tuple[str, ...], ModelColumns[Any]]] = {}

    @staticmethod
    def _compile(
        connection: BaseDatabaseWrapper, expression: Expression, params: list[Any] | None = None
    ) -> tuple[str, list[Any]]:
        """The SQL of an expression over the entry table, as the ORM's compiler writes it."""
        compiler = Query(Entry).get_compiler(connection=connection)
        sql, compiled = compiler.compile(expression.resolve_expression(compiler.query))
        if params is not None and list(compiled) != params:
            raise AssertionError(f"unexpected parameters {compiled!r} in {sql}")
        return sql, list(compiled)

    def index_column(self, model: type[Model], name: str) -> str:
        return f"{self.index_tables[model]}.{self.quote(model._meta.get_field(name).column)}"

    def render(self, shape: Shape) -> tuple[str, tuple[str, ...], ModelColumns[Entry]]:
        """The statement of one shape (without LIMIT), and the names of its parameters in order."""
        columns = self.columns[shape.search_columns]
        joins = []
        where: list[tuple[str, tuple[str, ...]]] = []
        where.append((f"{self.entry_codex} = {self.codex_cast}", ("codex",)))
        # SQLite's trigram lookup bounds its own ids by the cursor (``SQLITE_TRIGRAM_MATCH_AFTER``).
        sqlite_trigram = shape.query == TRIGRAM and self.vendor == "sqlite"
        if shape.after and not sqlite_trigram:
            where.append((f"{self.entry_id} > %s", ("after",)))
        if shape.upto:
            where.append((f"{self.entry_id} <= %s", ("upto",)))
        order = self.entry_id
        # PostgreSQL's trigram step tests a tag or agent on each match's own row (its
        # ``tags`` or ``related_agent_ids`` list, the source of truth that the index tables
        # copy; ``prefilters.tested_on_the_row``): the step is taken for a word the sample
        # found rare, so its matches are few, but the planner, judging the word by the whole
        # table, would join them to every index row of a common tag.
        on_the_row = tested_on_the_row(self.vendor, shape.query)
        for present, model, value in [(shape.agent, EntryRelatedAgent, "agent"), (shape.tag, EntryTag, "tag")]:
            if not present:
                continue
            if on_the_row:
                column = self.quote(Entry._meta.get_field(ON_THE_ROW[value]).column)
                where.append((f"{self.entry}.{column} @> %s", (f"{value}_list",)))
                continue
            # Each index row is bounded on its own codex and entry columns (one join), so the
            # database can walk the (codex, value, entry) index in entry order from the cursor
            # instead of collecting every row with the value. Ordering by that index's entry
            # column (the same id) lets SQLite skip a sort too.
            entry = self.index_column(model, "entry")
            joins.append(f" INNER JOIN {self.index_tables[model]} ON ({self.entry_id} = {entry})")
            where.append((f"{self.index_column(model, 'codex')} = %s", ("codex",)))
            if shape.after:
                where.append((f"{entry} > %s", ("after",)))
            if shape.upto:
                where.append((f"{entry} <= %s", ("upto",)))
            where.append((f"{self.index_column(model, 'value')} = %s", (value,)))
            order = entry
        if shape.written_by:
            revision = self.quote(EntryRevision._meta.db_table)
            column = {
                name: f"U0.{self.quote(EntryRevision._meta.get_field(name).column)}"
                for name in ("writer_client_id", "writer_kind", "codex", "entry")
            }
            where.append(
                (
                    f'EXISTS(SELECT 1 AS "a" FROM {revision} U0 WHERE ({column["writer_client_id"]} = %s'
                    f" AND {column['writer_kind']} = %s AND {column['codex']} = %s"
                    f" AND {column['entry']} = ({self.entry_id})) LIMIT 1)",
                    ("written_by", "application", "codex"),
                )
            )
        if shape.query == LIKE:
            where.append((self.walk, ("walk",) * len(_LIKE_COLUMNS)))
        elif sqlite_trigram:
            match = SQLITE_TRIGRAM_MATCH_AFTER if shape.after else SQLITE_TRIGRAM_MATCH
            where.append((f"{self.entry_id} IN ({match})", ("trigram",)))
        elif shape.query == TRIGRAM:
            where.append((self.trigram_keys, ("codex", "walk")))
            where.append((self.like, ("like",) * len(_LIKE_COLUMNS)))
        conditions = " AND ".join(sql for sql, _ in where)
        if len(where) > 1:
            conditions = f"({conditions})"
        sql = (
            f"SELECT {', '.join(columns.sql)}, {self.excerpt_sql} AS {self.quote('excerpt')}"
            f" FROM {self.entry}{''.join(joins)} WHERE {conditions} ORDER BY {order} ASC"
        )
        return sql, ("excerpt", *(name for _, names in where for name in names)), columns

    def render_window(self, model: type[Model], after: bool) -> tuple[str, tuple[str, ...], ModelColumns[Any]]:
        """The walk's ids from the entry table (``model`` Entry) or a tag or agent index."""
        if model is Entry:
            table, codex, column, ids = self.entry, self.entry_codex, self.entry_id, self.entry_ids
            where = [(f"{codex} = %s", ("codex",))]
        else:
            table, column, ids = self.index_tables[model], self.index_column(model, "entry"), self.index_entry[model]
            where = [(f"{self.index_column(model, 'codex')} = %s", ("codex",))]
            where.append((f"{self.index_column(model, 'value')} = %s", ("tag" if model is EntryTag else "agent",)))
        if after:
            where.append((f"{column} > %s", ("after",)))
        conditions = " AND ".join(sql for sql, _ in where)
        if len(where) > 1:
            conditions = f"({conditions})"
        sql = f"SELECT {column} AS {self.quote(ids.fields[0].attname)} FROM {table} WHERE {conditions} ORDER BY 1 ASC"
        return sql, tuple(name for _, names in where for name in names), ids


class SearchStatements(PerDatabase):
    """The candidate statements of ``notebook.selectors``, rendered once per database and shape."""

    def build(self, connection: BaseDatabaseWrapper) -> _SearchSQL:
        return _SearchSQL(connection)

    def _statement(self, database: _SearchSQL, shape: Shape) -> tuple[str, tuple[str, ...], ModelColumns[Entry]]:
        built = database.statements.get(shape)
        if built is None:
            built = database.statements[shape] = database.render(shape)
        return built

    def candidates(
        self,
        *,
        codex_id: int,
        limit: int,
        after: uuid.UUID | None = None,
        upto: uuid.UUID | None = None,
        tag: str | None = None,
        agent: str | None = None,
        written_by: str | None = None,
        query: str = "",
        prefilter: str | None = None,
        search_columns: bool = False,
        bitmap_only: bool = False,
    ) -> list[Entry]:
        """The first ``limit`` entries of the codex in id order (after ``after``, up to and
        including ``upto``) that have ``tag``, ``agent`` and a revision written by the
        application ``written_by`` (each when given), narrowed by the normalized ``query``
        as ``prefilter`` says (LIKE or TRIGRAM; None: not at all). As the queryset
        ``Entry.objects.filter(...).defer(...).annotate(excerpt=...)`` made them.
        ``bitmap_only`` (PostgreSQL): planned with ``prefilters.PG_BITMAP_ONLY``, in the same
        round trip (``_bitmap_only``)."""
        alias = router.db_for_read(Entry)
        database = self.built(alias)
        connection = connections[alias]
        shape = Shape(
            after is not None,
            upto is not None,
            tag is not None,
            agent is not None,
            written_by is not None,
            prefilter,
            search_columns,
        )
        sql, names, columns = self._statement(database, shape)
        values = self._values(database, connection, codex_id, after, upto, tag, agent)
        if written_by is not None:
            revision = EntryRevision._meta
            values["written_by"] = revision.get_field("writer_client_id").get_db_prep_value(written_by, connection)
            values["application"] = revision.get_field("writer_kind").get_db_prep_value(APPLICATION, connection)
        if prefilter is not None:
            values["walk"] = query
            values["like"] = database.like_value(query)
            if database.vendor == "sqlite":
                values["trigram"] = sqlite_trigram_params(values["codex"], query, values.get("after"))
        params = self._params(database, names, values)
        if bitmap_only:
            found = _bitmap_only(connection, f"{sql} LIMIT {int(limit)}", params)
        else:
            found = run(connection, f"{sql} LIMIT {int(limit)}", params, fetchall, prepare=False)
        return _entries(found, columns, database, connection)

    def window_end(
        self,
        *,
        codex_id: int,
        offset: int,
        after: uuid.UUID | None = None,
        tag: str | None = None,
        agent: str | None = None,
    ) -> uuid.UUID | None:
        """The id ``offset`` places after ``after`` in the codex (by tag, or else by agent,
        if given, read from that index alone), or None when no entry follows it: a window's
        last id when the walk goes on past the window."""
        alias = router.db_for_read(Entry)
        database = self.built(alias)
        connection = connections[alias]
        model = EntryTag if tag is not None else EntryRelatedAgent if agent is not None else Entry
        key = (model, after is not None)
        built = database.windows.get(key)
        if built is None:
            built = database.windows[key] = database.render_window(model, after is not None)
        sql, names, ids = built
        values = self._values(database, connection, codex_id, after, None, tag, agent)
        # The window's last id and the next one: when no entry follows the window, the walk
        # alone covers the rest.
        # As the ORM writes it: no OFFSET 0.
        limits = f" LIMIT 2 OFFSET {int(offset)}" if offset else " LIMIT 2"
        ends = run(connection, sql + limits, self._params(database, names, values), fetchall, prepare=False)
        return ids.convert(ends[0], connection)[0] if len(ends) == 2 else None

    @staticmethod
    def _values(
        database: _SearchSQL,
        connection: BaseDatabaseWrapper,
        codex_id: int,
        after: uuid.UUID | None,
        upto: uuid.UUID | None,
        tag: str | None,
        agent: str | None,
    ) -> dict[str, Any]:
        meta = Entry._meta
        values: dict[str, Any] = {
            "codex": meta.get_field("codex").get_db_prep_value(codex_id, connection),
            "excerpt": database.excerpt_params,
        }
        for name, value in (("after", after), ("upto", upto)):
            if value is not None:
                values[name] = meta.pk.get_db_prep_value(value, connection)
        for name, model, value in (("tag", EntryTag, tag), ("agent", EntryRelatedAgent, agent)):
            if value is not None:
                values[name] = model._meta.get_field("value").get_db_prep_value(value, connection)
                # As the ``contains`` lookup of a JSONField prepares its value (jsonb).
                values[f"{name}_list"] = meta.get_field(ON_THE_ROW[name]).get_db_prep_value([value], connection)
        return values

    @staticmethod
    def _params(database: _SearchSQL, names: Sequence[str], values: dict[str, Any]) -> list[Any]:
        params: list[Any] = []
        for name in names:
            if name in ("excerpt", "trigram"):
                params.extend(values[name])
            else:
                params.append(values[name])
        return params


def bound(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> str:
    """``sql`` with its parameters written in as literals, as psycopg's client-side binding
    writes them (Django's own cursors bind so), for ``run`` with no parameters."""
    import psycopg

    connection.ensure_connection()
    return psycopg.ClientCursor(connection.connection).mogrify(sql, params)


def _bitmap_only(connection: BaseDatabaseWrapper, sql: str, params: Sequence[Any]) -> list[Any]:
    """The rows of the PostgreSQL statement ``sql`` planned with ``PG_BITMAP_ONLY``: the old
    settings saved, the new ones made, the statement, and the old ones put back, sent as one
    simple query, so one round trip instead of four (BEGIN, the settings, the statement,
    COMMIT). PostgreSQL runs the statements of one simple query outside a transaction in a
    transaction of their own, where ``set_config(..., true)`` holds to its end as ``SET LOCAL``
    would; inside a caller's transaction the restoring undoes them. (Not a savepoint rolled
    back to: psycopg drops its prepared statements on any ROLLBACK.)"""
    script = f"{PG_BITMAP_ONLY_SAVE}; {PG_BITMAP_ONLY_SET}; {bound(connection, sql, params)}; {PG_BITMAP_ONLY_RESTORE}"
    return run(connection, script, None, _third_result)


def _third_result(cursor: Any) -> list[Any]:
    cursor.nextset()
    cursor.nextset()
    return cursor.fetchall()


def _entries(
    rows: Sequence[Sequence[Any]], columns: ModelColumns[Entry], database: _SearchSQL, connection: BaseDatabaseWrapper
) -> list[Entry]:
    """The rows as instances with their ``excerpt`` annotation, as the queryset made them."""
    direct = columns.loads_directly()
    size = len(columns)
    expression, converters = database.excerpt_expression, database.excerpt_converters
    entries = []
    for row in rows:
        entry = columns.loaded(row[:size], connection, direct=direct)
        excerpt = row[size]
        for converter in converters:
            excerpt = converter(excerpt, expression, connection)
        entry.excerpt = excerpt
        entries.append(entry)
    return entries
