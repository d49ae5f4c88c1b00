"""Which codexes a SQL statement reaches: the check behind tests/test_shard_readiness.py.

Past one primary the notebook's tables are distributed by codex (docs/capacity.md), and a
statement is served by one node only if each notebook table it names is pinned to one codex.
``confinement`` reads a statement as the database was sent it (Django's ``%s`` and ``%(name)s``
parameters, with their values) and says, for each notebook table it names, whether its rows are
pinned to one codex, and by what:

- **a predicate on the codex key**: ``codex_id`` (``notebook_codex``: ``id``, or its other
  unique key ``owner_id``) equal to a parameter or a literal, in the WHERE clause or an inner
  join's ON, directly or through other columns equal to it (``tag.codex_id = entry.codex_id``,
  a CTE's column that is such a value). A LEFT JOIN's ON pins only the table it joins.
- **a value found in one row**: a column of a row that a unique key pins (the token's row, found
  by its checksum, names one user, whose one codex names the entries a get reads ahead). Such a
  statement reaches one codex, but finds which inside itself: a distributed database could not
  route it from its parameters alone, so these are reported apart (``routed_by_parameter``).
- **a write whose rows carry it**: an INSERT's codex column given as such a value in every row.

It also collects every parameter or literal value a codex key is equal to, so a caller can
check they are all the one codex (``codex_values``, ``owner_values``): ``codex_id IN (1, 2)``
is pinned to values, just not to one.

SQLite's FTS5 tables (``notebook_entry_trigram*``, migrations 0002 and 0007) are SQLite's own
single-node machinery, never distributed: they are not notebook tables here. SQLite's ``MATCH``
operator, which sqlglot does not parse, is read as an equality (the FTS5 table's, not checked).
"""

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from django.apps import apps
from django.db.models import UniqueConstraint
from sqlglot import exp

# Each notebook table and its codex keys: the columns whose one value names one codex.
CODEX_KEYS = {
    "notebook_codex": ("id", "owner_id"),
    "notebook_entry": ("codex_id",),
    "notebook_entryrevision": ("codex_id",),
    "notebook_entrytag": ("codex_id",),
    "notebook_entryrelatedagent": ("codex_id",),
    "notebook_requestkey": ("codex_id",),
}
# Transaction control, which names no table.
_CONTROL = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b", re.IGNORECASE)
_PLACEHOLDERS = re.compile(r"%%|%\((\w+)\)s|%s")
_QUERIES = (exp.Select, exp.Update, exp.Delete, exp.Insert)


def unique_keys() -> dict[str, list[tuple[str, ...]]]:
    """Every installed model's table and the column sets its database keeps unique (the
    primary key, unique fields, unique constraints without a condition)."""
    keys: dict[str, list[tuple[str, ...]]] = {}
    for model in apps.get_models():
        meta = model._meta
        found = [(field.column,) for field in meta.concrete_fields if field.primary_key or field.unique]
        for names in meta.unique_together:
            found.append(tuple(meta.get_field(name).column for name in names))
        for constraint in meta.constraints:
            if isinstance(constraint, UniqueConstraint) and constraint.fields and constraint.condition is None:
                found.append(tuple(meta.get_field(name).column for name in constraint.fields))
        keys.setdefault(meta.db_table, []).extend(found)
    return keys


@dataclass
class Reach:
    """One notebook table named by a statement, and how its rows are pinned to a codex."""

    table: str
    name: str  # as the statement names it (its alias)
    pinned_by: str | None  # the codex key and what it equals, or None: not pinned
    by_parameter: bool  # pinned by a parameter or literal, not by a value found in a row


@dataclass
class Confinement:
    sql: str
    reaches: list[Reach] = field(default_factory=list)
    codex_values: set[str] = field(default_factory=set)
    owner_values: set[str] = field(default_factory=set)

    @property
    def notebook(self) -> bool:
        return bool(self.reaches)

    @property
    def confined(self) -> bool:
        return all(reach.pinned_by is not None for reach in self.reaches)

    @property
    def routed_by_parameter(self) -> bool:
        """Whether every notebook table but the codex table (the owner's table, not
        distributed) is pinned by a parameter or literal."""
        return all(reach.by_parameter for reach in self.reaches if reach.table != "notebook_codex")

    def problems(self, *, codex: Any, owner: Any) -> list[str]:
        """What keeps the statement from one codex (``codex``, owned by ``owner``)."""
        found = [f"{reach.table} {reach.name} is pinned to no codex" for reach in self.reaches if not reach.pinned_by]
        if self.codex_values - {str(codex)}:
            found.append(f"codex keys equal {sorted(self.codex_values)}, not only codex {codex}")
        if self.owner_values - {str(owner)}:
            found.append(f"owner keys equal {sorted(self.owner_values)}, not only owner {owner}")
        return found


def is_control(sql: str) -> bool:
    return bool(_CONTROL.match(sql))


def _with_names(sql: str, params: Sequence[Any] | Mapping[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """``sql`` with each Django parameter as a named placeholder sqlglot reads (``:p0``,
    ``:name``), and the values by those names. ``params`` None: the values are written in."""
    if params is None:
        return sql, {}
    values: dict[str, Any] = {}
    position = iter(range(len(params))) if not isinstance(params, Mapping) else None

    def name(match: re.Match) -> str:
        if match.group(0) == "%%":
            return "%"
        if match.group(1) is not None:
            values[match.group(1)] = params[match.group(1)]
            return f":{match.group(1)}"
        index = next(position)
        values[f"p{index}"] = params[index]
        return f":p{index}"

    return _PLACEHOLDERS.sub(name, sql), values


def confinement(
    sql: str, params: Sequence[Any] | Mapping[str, Any] | None, vendor: str, keys: Mapping[str, list[tuple[str, ...]]]
) -> Confinement:
    """How each notebook table ``sql`` names is pinned to a codex (the module's docstring)."""
    result = Confinement(sql)
    if is_control(sql):
        return result
    text, values = _with_names(sql, params)
    if vendor == "sqlite":
        text = re.sub(r"\bMATCH\b", "=", text)
    for statement in sqlglot.parse(text, read="sqlite" if vendor == "sqlite" else "postgres"):
        if statement is not None:
            _Statement(statement, values, keys).judge(result)
    return result


@dataclass(eq=False)
class _Source:
    """A table, CTE, subquery or function in a FROM (or an UPDATE's, DELETE's or INSERT's target)."""

    names: tuple[str, ...]
    table: str | None  # a real table's name
    key: Any  # what its columns are known by (a CTE's are the same wherever it is named)
    join: exp.Join | None = None  # the join that brings it in, if one does


class _Statement:
    def __init__(self, root: exp.Expression, values: dict[str, Any], keys: Mapping[str, list[tuple[str, ...]]]):
        self.root = root
        self.values = values
        self.keys = keys
        with_ = root.args.get("with_") or root.args.get("with")
        self.ctes = {cte.alias_or_name: cte.this for cte in (with_.expressions if with_ else [])}
        self.sources: dict[int, list[_Source]] = {}  # by id() of the query
        for query in root.find_all(*_QUERIES):
            self.sources[id(query)] = list(self._sources_of(query))
        # Each term (a column of a source, a parameter, a literal) known to hold one value,
        # with what it equals: ("param", name) / ("lit", value) / ("row", a source's key).
        self.known: dict[Any, set[tuple[str, str]]] = {}
        self.edges: list[tuple[Any, Any, bool]] = []  # (a, b, both ways)
        self.rows: dict[int, list[dict[str, Any]]] = {}  # each INSERT's rows: their terms by column
        self._collect()
        self._settle()

    # --- sources -------------------------------------------------------------------------------

    def _sources_of(self, query: exp.Expression) -> Iterator[_Source]:
        if isinstance(query, exp.Insert):
            target = query.this.this if isinstance(query.this, exp.Schema) else query.this
            yield self._source(target)
            return
        if isinstance(query, exp.Update | exp.Delete):
            yield self._source(query.this)
        tables = []
        from_ = query.args.get("from_") or query.args.get("from")
        if from_ is not None:
            tables.append((from_.this, None))
        tables.extend((table, None) for table in query.args.get("using") or [])
        joins = list(query.args.get("joins") or [])
        for table, _ in list(tables):
            joins.extend(table.args.get("joins") or [])
        tables.extend((join.this, join) for join in joins)
        for table, join in tables:
            yield self._source(table, join)

    def _source(self, node: exp.Expression, join: exp.Join | None = None) -> _Source:
        alias = node.alias if isinstance(node, exp.Table | exp.Subquery) else ""
        if isinstance(node, exp.Table) and node.name in self.ctes:
            return _Source((alias or node.name, node.name), None, ("cte", node.name), join)
        if isinstance(node, exp.Table):
            return _Source(tuple(filter(None, (alias, node.name))), node.name, ("table", id(node)), join)
        if isinstance(node, exp.Subquery):
            return _Source((alias,), None, ("subquery", id(node.this)), join)
        return _Source((node.alias_or_name,), None, ("function", id(node)), join)

    def _resolve(self, column: exp.Column) -> tuple[Any, str] | None:
        """(the source key, the column name) of ``column``: the nearest query (this one or an
        outer one, for a correlated subquery) with a source of its qualifier's name."""
        qualifier, name = column.table, column.name
        query = column.find_ancestor(*_QUERIES)
        while query is not None:
            sources = self.sources.get(id(query), [])
            if qualifier:
                for source in sources:
                    if qualifier in source.names:
                        return source.key, name
            else:
                if isinstance(query, exp.Insert):  # RETURNING "codex_id": the target's
                    return sources[0].key, name
                tables = [source for source in sources if source.table is not None or source.key[0] == "cte"]
                if len(tables) == 1:
                    return tables[0].key, name
            query = query.find_ancestor(*_QUERIES)
        return None

    # --- terms and what equals what -------------------------------------------------------------

    def _term(self, node: exp.Expression) -> Any:
        while isinstance(node, exp.Paren | exp.Cast):
            node = node.this
        if isinstance(node, exp.Placeholder):
            term = ("param", node.name)
            self.known.setdefault(term, {("param", node.name)})
            return term
        if isinstance(node, exp.Literal):
            term = ("lit", node.this)
            self.known.setdefault(term, {("lit", node.this)})
            return term
        if isinstance(node, exp.Column):
            resolved = self._resolve(node)
            return None if resolved is None else ("col", *resolved)
        return None

    def _atoms(self, condition: exp.Expression | None) -> Iterator[exp.Expression]:
        """The conjuncts of ``condition`` (its top-level ANDs, through parentheses)."""
        if condition is None:
            return
        while isinstance(condition, exp.Paren):
            condition = condition.this
        if isinstance(condition, exp.And):
            yield from self._atoms(condition.this)
            yield from self._atoms(condition.expression)
        else:
            yield condition

    def _equate(self, atom: exp.Expression, *, only_to: Any = None) -> None:
        """Record what ``atom`` makes equal; ``only_to``: an outer-joined source's key, the one
        side the atom may pin."""
        if isinstance(atom, exp.EQ | exp.NullSafeEQ):
            pairs = [(atom.this, atom.expression)]
        elif isinstance(atom, exp.In) and atom.expressions and not atom.args.get("query"):
            if len(atom.expressions) == 1:
                pairs = [(atom.this, atom.expressions[0])]
            else:  # a list of values: pinned, but to each of them (the caller checks they are one)
                column = self._term(atom.this)
                items = [self._term(item) for item in atom.expressions]
                if column is not None and all(item is not None and item[0] != "col" for item in items):
                    pseudo = ("list", id(atom))
                    self.known[pseudo] = set().union(*(self.known[item] for item in items))
                    self._edge(pseudo, column, only_to)
                return
        else:
            return
        for left, right in pairs:
            a, b = self._term(left), self._term(right)
            if a is not None and b is not None:
                self._edge(a, b, only_to)

    def _edge(self, a: Any, b: Any, only_to: Any) -> None:
        if only_to is None:
            self.edges.append((a, b, True))
            return
        for one, other in ((a, b), (b, a)):
            if one[0] == "col" and one[1] == only_to:
                self.edges.append((other, one, False))

    def _collect(self) -> None:
        for query in self.root.find_all(*_QUERIES):
            for atom in self._atoms(query.args.get("where") and query.args["where"].this):
                self._equate(atom)
            for source in self.sources[id(query)]:
                if source.join is None:
                    continue
                # A LEFT JOIN's ON pins the rows it joins, never the rows it joins them to.
                only_to = source.key if source.join.side in ("LEFT", "FULL") else None
                for atom in self._atoms(source.join.args.get("on")):
                    self._equate(atom, only_to=only_to)
            self._outputs(query)

    def _outputs(self, query: exp.Expression) -> None:
        """What a CTE's or subquery's columns are, and what an INSERT's rows put in its target."""
        parent = query.parent
        if isinstance(parent, exp.CTE | exp.Subquery) and not isinstance(query, exp.Insert | exp.Update | exp.Delete):
            key = ("cte", parent.alias_or_name) if isinstance(parent, exp.CTE) else ("subquery", id(query))
            for item in query.expressions:
                self._output(key, item)
        if isinstance(query, exp.Insert | exp.Update | exp.Delete):
            returning = query.args.get("returning")
            if isinstance(parent, exp.CTE) and returning is not None:
                for item in returning.expressions:
                    self._output(("cte", parent.alias_or_name), item)
        if isinstance(query, exp.Insert):
            self._inserted(query)

    def _output(self, key: Any, item: exp.Expression) -> None:
        name = item.alias_or_name
        term = self._term(item.this if isinstance(item, exp.Alias) else item)
        if name and term is not None:
            self.edges.append((term, ("col", key, name), False))

    def _inserted(self, insert: exp.Insert) -> None:
        """Each inserted row's values, by target column; the target's columns, where one row."""
        columns = [column.name for column in insert.this.expressions] if isinstance(insert.this, exp.Schema) else []
        target = self.sources[id(insert)][0].key
        rows: list[dict[str, Any]] = []
        source = insert.expression
        if isinstance(source, exp.Values):
            for row in source.expressions:
                rows.append(dict(zip(columns, (self._term(value) for value in row.expressions), strict=False)))
        elif isinstance(source, exp.Select):
            from_ = source.args.get("from_") or source.args.get("from")
            items = source.expressions
            if len(items) == 1 and isinstance(items[0], exp.Star) and from_ and isinstance(from_.this, exp.Unnest):
                # Django's bulk insert on PostgreSQL: a column per array parameter, each row an element.
                arrays = [self._term(array) for array in from_.this.expressions]
                rows.append({column: ("array", term) for column, term in zip(columns, arrays, strict=False)})
            else:
                rows.append(dict(zip(columns, (self._term(item) for item in items), strict=False)))
        self.rows[id(insert)] = rows
        if len(rows) == 1:
            for column, term in rows[0].items():
                if term is not None and term[0] != "array":
                    self.edges.append((term, ("col", target, column), False))

    # --- settling what is known -----------------------------------------------------------------

    def _settle(self) -> None:
        """Spread what is known along the equalities, and to every column of a row a unique key
        pins (its columns then hold one value each, witnessed by that row), until nothing changes."""
        terms = {term for a, b, _ in self.edges for term in (a, b) if term[0] == "col"}
        tables = [source for sources in self.sources.values() for source in sources if source.table is not None]
        self.one_row: set[Any] = set()
        changed = True
        while changed:
            changed = False
            for a, b, both in self.edges:
                for one, other in ((a, b), (b, a)) if both else ((a, b),):
                    if one in self.known and not self.known[one] <= self.known.get(other, set()):
                        self.known.setdefault(other, set()).update(self.known[one])
                        changed = True
            for source in tables:
                if source.key in self.one_row or not self._one_row(source):
                    continue
                self.one_row.add(source.key)
                changed = True
                for term in terms:
                    if term[1] == source.key:
                        self.known.setdefault(term, set()).add(("row", source.key))

    def _one_row(self, source: _Source) -> bool:
        return any(
            all(("col", source.key, column) in self.known for column in columns)
            for columns in self.keys.get(source.table, [])
        )

    # --- the verdict ----------------------------------------------------------------------------

    def judge(self, result: Confinement) -> None:
        for query in self.root.find_all(*_QUERIES):
            for position, source in enumerate(self.sources[id(query)]):
                if source.table not in CODEX_KEYS:
                    continue
                if isinstance(query, exp.Insert) and position == 0:
                    result.reaches.append(self._inserted_reach(query, source, result))
                else:
                    result.reaches.append(self._read_reach(source, result))

    def _witnesses(self, term: Any, column: str, result: Confinement) -> tuple[bool, bool]:
        """(whether ``term`` holds one value, whether a parameter or literal says which),
        with those values collected in ``result``."""
        # A row's own key says which row, not which codex: only a value from elsewhere (a
        # parameter, a literal, another row) pins a codex key.
        found = {witness for witness in self.known.get(term, set()) if witness != ("row", term[1])}
        if not found:
            return False, False
        collected = result.owner_values if column == "owner_id" else result.codex_values
        given = False
        for kind, name in found:
            if kind == "param":
                collected.add(str(self.values[name]))
                given = True
            elif kind == "lit":
                collected.add(str(name))
                given = True
        return True, given

    def _read_reach(self, source: _Source, result: Confinement) -> Reach:
        for column in CODEX_KEYS[source.table]:
            pinned, given = self._witnesses(("col", source.key, column), column, result)
            if pinned:
                how = "a parameter" if given else "a value found in one row"
                return Reach(source.table, source.names[0], f"{column} = {how}", given)
        return Reach(source.table, source.names[0], None, False)

    def _inserted_reach(self, insert: exp.Insert, source: _Source, result: Confinement) -> Reach:
        rows = self.rows.get(id(insert), [])
        for column in CODEX_KEYS[source.table]:
            terms = [row.get(column) for row in rows]
            if not terms or any(term is None for term in terms):
                continue
            given_all = True
            for term in terms:
                if term[0] == "array":
                    array = term[1]
                    if array is None or array[0] != "param":
                        break
                    result.codex_values.update(str(value) for value in self.values[array[1]])
                    continue
                pinned, given = self._witnesses(term, column, result)
                if not pinned:
                    break
                given_all = given_all and given
            else:
                how = "a parameter" if given_all else "a value found in one row"
                return Reach(source.table, source.names[0], f"every row's {column} = {how}", given_all)
        return Reach(source.table, source.names[0], None, False)
