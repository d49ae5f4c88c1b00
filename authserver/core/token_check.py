"""The bearer-token check of the MCP resource (contract 8): the one place a presented access
token is read and judged. ``mcp_endpoint.auth`` calls it; it writes nothing.

Tokens are django-oauth-toolkit access tokens, looked up by the SHA-256 checksum DOT keeps
(the token itself may be redacted at rest), with one query that brings the user, the user's
codex and the application along. A token is accepted only if it exists, has not expired
(DOT's ``AccessToken.is_expired``), is bound to exactly this server's resource, belongs to
a person who may hold tokens (``authserver.core.tokens.person_may_hold_tokens``, the answer every
issuance asks too), and holds the scopes asked for (DOT's ``AccessToken.allow_scopes``).
DOT's own ``allows_audience`` is not used: it lets a token without a resource through,
where contract 8 accepts only a token bound to this server. The database is asked on every
call, and nothing of a check is kept for a later one, so revocation, expiry or a deactivated
user take effect on the very next call.

The query has two versions, like the notebook's (``notebook.store``): SQL built once per
database (``notebook.sql``: the ORM spent more time compiling this three-join query on every
call than the database spent answering it) and, with ``CODEX_FAST_PATH=0``, the queryset.

On the fast path the check's statement can carry the call's first read (``ReadAhead``: a get's
entry, joined on the token's codex), so that the check and the read are one round trip. The
row is handed over as the check reads it, before the token is judged: only a call whose check
then passes goes on to use it.
"""

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connections, router
from django.db.backends.base.base import BaseDatabaseWrapper
from oauth2_provider.models import get_access_token_model

import codex_metrics
from authserver.core.tokens import person_may_hold_tokens
from notebook.exceptions import NotebookError, PermissionDenied, Unauthenticated, Unavailable
from notebook.sql.cache import PerDatabase
from notebook.sql.converters import ModelColumns
from notebook.sql.driver import fetchone, run


class TokenRefused(NotebookError):
    """A bearer token refused, in the one form it keeps from the check to the answer: ``status``
    is the HTTP answer when it refuses the request (``error`` the challenge's error code, none for
    a request without a token), and, as a ``NotebookError``, its ``code`` is the tool result's
    when a call's own check refuses after the request's passed (contract 6: ``unauthenticated``,
    ``permission_denied``, ``unavailable``). ``message`` is safe to show; ``needed`` is the
    scopes the check asked for (a 403's challenge names them)."""

    status = 401
    error: str | None = "invalid_token"

    def __init__(self, message: str, *, reason: str | None, needed: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.needed = needed
        if reason is not None:
            codex_metrics.token_refused(reason)  # each refusal is counted once, where it is decided

    @property
    def description(self) -> str:
        return self.message


class TokenMissing(TokenRefused, Unauthenticated):
    """No bearer token in the Authorization header (401 with the challenge, no error code)."""

    error = None

    def __init__(self, message: str) -> None:
        super().__init__(message, reason="missing")


class TokenRejected(TokenRefused, Unauthenticated):
    """The bearer token cannot be used here (401 ``invalid_token``)."""

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message, reason=reason)


class ScopesMissing(TokenRefused, PermissionDenied):
    """The token is valid but lacks scopes the call needs (403 ``insufficient_scope``)."""

    status = 403
    error = "insufficient_scope"

    def __init__(self, missing: list[str], needed: tuple[str, ...] = ()) -> None:
        super().__init__(f"This call needs the scope {' '.join(missing)}", reason="insufficient_scope", needed=needed)
        self.missing = missing


class TokensUnavailable(TokenRefused, Unavailable):
    """The database could not answer the check (503 with ``Retry-After``; safe to retry)."""

    status = 503
    error = None

    def __init__(self) -> None:
        # Counted as the outage it is (common.outage), not as a refused token.
        super().__init__("The server cannot check tokens right now; retry shortly", reason=None)


@dataclass(frozen=True)
class TokenGrant:
    """What a valid token grants: whose codex, which scopes, and the OAuth application it
    was issued to (recorded as the writer of what the call saves or updates)."""

    token_checksum: str
    user: AbstractBaseUser
    scopes: frozenset[str]
    application_id: int | None = None
    client_id: str = ""
    application_name: str = ""


def token_checksum(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


class ReadAheadKind(Protocol):
    def joined(self, connection: BaseDatabaseWrapper, table: str, given: Mapping[str, str]) -> tuple[str, Any, list]:
        """``(LEFT JOIN clause, its ModelColumns, the fields of its parameters)`` with
        ``given["codex_id"]`` the SQL of the token's codex key (``KeyedRead.joined``)."""


class ReadAhead(Protocol):
    """A read of the token's codex that rides in the check's statement (``notebook.store``)."""

    kind: ReadAheadKind  # one statement is built per database and kind
    values: tuple[Any, ...]

    def take(self, instance: Any) -> None:
        """The row the statement read (None: no such row), as the check reads the token."""


class _TokenQuery(PerDatabase):
    """The check's one query as SQL: the token's expiry, scopes and resource, its user, the
    user's codex and the application's id, client_id and name, in one statement, built from
    the models' metadata (so swapped models and quoting still hold). Values go through the
    converters the ORM applies, and rows become instances as ``select_related`` makes them.
    ``ahead``: the kind of read the statement carries, joined last (or none)."""

    def __init__(self, ahead: ReadAheadKind | None = None) -> None:
        super().__init__()
        self.ahead = ahead

    def build(self, connection: BaseDatabaseWrapper) -> dict[str, Any]:
        quote = connection.ops.quote_name
        AccessToken = get_access_token_model()
        user_link = AccessToken._meta.get_field("user")
        application_link = AccessToken._meta.get_field("application")
        User, Application = user_link.related_model, application_link.related_model
        codex_link = User._meta.get_field("codex")  # the reverse one-to-one
        Codex = codex_link.related_model
        token = ModelColumns(AccessToken, "t", connection, ("id", "expires", "scope", "resource"))
        # Only what the check and the tool call use: the user's key and whether it is active,
        # the codex's key, owner and entry count (a search's walk window is sized by it). The
        # instances defer the rest (read on access, as ``only()`` would).
        user_columns = [
            field.name for field in User._meta.concrete_fields if field.primary_key or field.name == "is_active"
        ]
        user = ModelColumns(User, "u", connection, user_columns)
        codex = ModelColumns(Codex, "c", connection, ("id", codex_link.field.name, "entry_count"))
        application = ModelColumns(Application, "a", connection, ("id", "client_id", "name"))
        parts = [token, user, codex, application]
        ahead_join, ahead_fields = "", []
        if self.ahead is not None:
            ahead_join, ahead_columns, ahead_fields = self.ahead.joined(
                connection, "r", {"codex_id": f"c.{quote(Codex._meta.pk.column)}"}
            )
            parts.append(ahead_columns)
            ahead_join = " " + ahead_join
        columns = [column for part in parts for column in part.sql]
        tables = (
            f"{quote(AccessToken._meta.db_table)} t"
            f" LEFT JOIN {quote(User._meta.db_table)} u"
            f" ON u.{quote(User._meta.pk.column)} = t.{quote(user_link.column)}"
            f" LEFT JOIN {quote(Codex._meta.db_table)} c"
            f" ON c.{quote(codex_link.field.column)} = u.{quote(codex_link.field.target_field.column)}"
            f" LEFT JOIN {quote(Application._meta.db_table)} a"
            f" ON a.{quote(Application._meta.pk.column)} = t.{quote(application_link.column)}"
        )
        checksum = f"t.{quote(AccessToken._meta.get_field('token_checksum').column)}"
        sql = f"SELECT {', '.join(columns)} FROM {tables}{ahead_join} WHERE {checksum} = %s"
        return {"sql": sql, "parts": parts, "codex_link": codex_link, "ahead_fields": ahead_fields}

    def fetch(self, checksum: str, ahead: ReadAhead | None = None) -> Any:
        """The token with its user (and the user's codex) and application, or None; ``ahead``
        (of this query's kind) takes its row."""
        alias = router.db_for_read(get_access_token_model())
        built = self.built(alias)
        connection = connections[alias]
        params = [checksum]
        if ahead is not None:
            # The join's parameters come before the WHERE clause's.
            fields = built["ahead_fields"]
            params = [
                field.get_db_prep_value(value, connection) for field, value in zip(fields, ahead.values, strict=True)
            ]
            params.append(checksum)
        row = run(connection, built["sql"], params, fetchone)
        if row is None:
            return None
        instances = []
        start = 0
        for part in built["parts"]:
            instances.append(part.instance(row[start : start + len(part)], connection))
            start += len(part)
        if ahead is not None:
            ahead.take(instances.pop())
        token, user, codex, application = instances
        codex_link = built["codex_link"]
        if user is not None:
            if codex is not None:
                codex_link.field.set_cached_value(codex, user)
            # As select_related does: a user without a codex answers user.codex without a query.
            codex_link.set_cached_value(user, codex)
        token_fields = type(token)._meta
        token_fields.get_field("user").set_cached_value(token, user)
        token_fields.get_field("application").set_cached_value(token, application)
        return token


_TOKEN_QUERY = _TokenQuery()
# The check's statement with each kind of read ahead, made on its first use.
_WITH_READ_AHEAD: dict[Any, _TokenQuery] = {}


def _read_token(checksum: str, ahead: ReadAhead | None) -> Any:
    if settings.CODEX_FAST_PATH:
        if ahead is None:
            return _TOKEN_QUERY.fetch(checksum)
        query = _WITH_READ_AHEAD.get(ahead.kind)
        if query is None:
            query = _WITH_READ_AHEAD.setdefault(ahead.kind, _TokenQuery(ahead.kind))
        return query.fetch(checksum, ahead)
    return (
        get_access_token_model()
        .objects.select_related("user__codex", "application")
        .filter(token_checksum=checksum)
        .first()
    )


def check_access_token(checksum: str, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant:
    """Re-read the token from the database (one query) and check it, then the scopes the call
    needs: raise ``TokenRejected`` or ``ScopesMissing``, or return what the token grants.
    ``ahead``: a read for the same statement to make, on the fast path (the module's docstring)."""
    token = _read_token(checksum, ahead)
    if token is None:
        # Unknown and revoked look the same: DOT deletes revoked access tokens.
        raise TokenRejected("The access token is not recognized or has been revoked")
    if token.is_expired():
        raise TokenRejected("The access token has expired", reason="expired")
    if token.resource != [settings.CODEX_RESOURCE_URL]:
        raise TokenRejected(
            f"The access token was not issued for {settings.CODEX_RESOURCE_URL}", reason="wrong_audience"
        )
    user = token.user
    if not person_may_hold_tokens(user):
        raise TokenRejected("The access token's user cannot use this server", reason="user_inactive")
    needed = list(scopes)
    if not token.allow_scopes(needed):
        held = set(token.scope.split())
        raise ScopesMissing([scope for scope in dict.fromkeys(needed) if scope not in held], tuple(needed))
    application = token.application
    return TokenGrant(
        token_checksum=checksum,
        user=user,
        scopes=frozenset(token.scope.split()),
        application_id=application.pk if application is not None else None,
        client_id=application.client_id if application is not None else "",
        application_name=application.name if application is not None else "",
    )
