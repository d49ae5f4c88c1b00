"""A SCIM filter (parsed by scim2-models) as a Django ``Q`` over the people of one
organization (``ProvisionedPerson``).

Only what the database answers with the organization's rows in hand is translated: the
comparisons ``eq``, ``ne``, ``co``, ``sw``, ``ew`` and ``pr`` on ``id``, ``userName``,
``externalId``, ``displayName``, ``name.givenName``, ``name.familyName`` and the primary e-mail
(``emails``, ``emails.value``, ``emails[value ...]``), ``eq``/``ne``/``pr`` on ``active``,
joined by ``and``, ``or`` and ``not``. Anything else is ``invalidFilter``, as is a filter of more
than ``MAX_FILTER_NODES`` comparisons and operators (its text is bounded before it is parsed,
``MAX_FILTER_CHARACTERS``). The caller adds the organization's own condition, so no filter can
reach another organization's people; values are parameters of the ORM's lookups, never SQL.
"""

import uuid
from typing import Any

from django.db.models import Q
from scim2_models import InvalidFilterException
from scim2_models.path import (
    AttrPath,
    CompareOperator,
    Comparison,
    LogicalExpr,
    LogicalOperator,
    Not,
    Present,
    ValuePath,
)

from authserver.enterprise.scim.schema import MAX_FILTER_NODES
from authserver.enterprise.scim.values import comparison_key

# Attribute (lowercase, as SCIM names are case-insensitive) -> (field, how values compare).
_TEXT = {
    "username": ("user_name_key", "key"),
    "externalid": ("external_id", "exact"),
    "displayname": ("attributes__displayName", "insensitive"),
    "name.givenname": ("user__first_name", "insensitive"),
    "name.familyname": ("user__last_name", "insensitive"),
    "emails": ("user__email", "insensitive"),
    "emails.value": ("user__email", "insensitive"),
}
_LOOKUPS = {
    ("exact", CompareOperator.eq): "exact",
    ("exact", CompareOperator.co): "contains",
    ("exact", CompareOperator.sw): "startswith",
    ("exact", CompareOperator.ew): "endswith",
    ("insensitive", CompareOperator.eq): "iexact",
    ("insensitive", CompareOperator.co): "icontains",
    ("insensitive", CompareOperator.sw): "istartswith",
    ("insensitive", CompareOperator.ew): "iendswith",
}


def _name(path: AttrPath, within: str | None) -> str:
    name = f"{path.attr}.{path.sub_attr}" if path.sub_attr else path.attr
    if within is not None:
        name = f"{within}.{name}"
    return name.lower()


class _Translation:
    def __init__(self) -> None:
        self.nodes = 0

    def q(self, node: Any, within: str | None = None) -> Q:
        self.nodes += 1
        if self.nodes > MAX_FILTER_NODES:
            raise InvalidFilterException(
                detail=f"A filter may hold at most {MAX_FILTER_NODES} comparisons and operators"
            )
        if isinstance(node, LogicalExpr):
            terms = [self.q(term, within) for term in node.terms]
            combined = terms[0]
            for term in terms[1:]:
                combined = combined & term if node.op == LogicalOperator.and_ else combined | term
            return combined
        if isinstance(node, Not):
            return ~self.q(node.expr, within)
        if isinstance(node, ValuePath):
            if within is not None or node.attr_path.sub_attr is not None or node.sub_attr is not None:
                raise InvalidFilterException(detail="This filter's form is not supported")
            return self.q(node.val_filter, _name(node.attr_path, None))
        if isinstance(node, Present):
            return self._present(_name(node.attr_path, within))
        if isinstance(node, Comparison):
            return self._comparison(_name(node.attr_path, within), node.op, node.value)
        raise InvalidFilterException(detail="This filter's form is not supported")

    @staticmethod
    def _present(name: str) -> Q:
        if name == "active" or name == "id" or name == "username":
            return Q()  # always present
        if name in _TEXT:
            field, _ = _TEXT[name]
            return Q(**{f"{field}__isnull": False}) & ~Q(**{field: ""})
        raise InvalidFilterException(detail=f"Filtering on {name!r} is not supported")

    @staticmethod
    def _comparison(name: str, op: CompareOperator, value: Any) -> Q:
        negated = op == CompareOperator.ne
        op = CompareOperator.eq if negated else op
        if name == "active":
            if op != CompareOperator.eq or not isinstance(value, bool):
                raise InvalidFilterException(detail="active compares with eq or ne to true or false")
            q = Q(user__is_active=value)
        elif name == "id":
            if op != CompareOperator.eq or not isinstance(value, str):
                raise InvalidFilterException(detail="id compares with eq or ne to a string")
            try:
                q = Q(scim_id=uuid.UUID(value))
            except ValueError:
                q = Q(pk__in=[])  # no person has it
        elif name in _TEXT:
            if not isinstance(value, str):
                raise InvalidFilterException(detail=f"{name} compares to a string")
            field, compared = _TEXT[name]
            if compared == "key":
                field, compared, value = field, "exact", comparison_key(value)
            lookup = _LOOKUPS.get((compared, op))
            if lookup is None:
                raise InvalidFilterException(detail=f"{name} compares with eq, ne, co, sw or ew")
            q = Q(**{f"{field}__{lookup}": value})
        else:
            raise InvalidFilterException(detail=f"Filtering on {name!r} is not supported")
        return ~q if negated else q


def filter_q(node: Any) -> Q:
    """The ``Q`` of a parsed filter's tree (``ScimFilter.ast``), or ``InvalidFilterException``."""
    return _Translation().q(node)
