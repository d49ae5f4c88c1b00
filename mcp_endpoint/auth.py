"""Bearer-token checks for the MCP resource (contract 8).

Tokens are django-oauth-toolkit access tokens, looked up by the SHA-256 checksum
DOT keeps (the token itself may be redacted at rest). A token is accepted only
if it exists, has not expired, is bound to exactly this server's resource, and
belongs to an active user, with one query (user, codex and application ride along).

Every request is checked; a tool call is checked once, afresh, right before its
service runs: for a single ``tools/call`` POST the HTTP guard leaves the check to
the tool handler (a ``DeferredCheck`` in the ASGI scope), which runs it in the same
worker-thread hop as the service; if it fails, the guard answers 401/403/503 with
the challenge instead of the tool result. Nothing about a token is cached between
calls, so revocation, expiry or a deactivated user take effect on the very next call.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connections, router
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

# The one door between the apps: the rest of mcp_endpoint takes the scope names
# (and the shared rate limiter) from here, and authserver (the lower app) never
# imports mcp_endpoint.
from authserver import ratelimit
from authserver.scopes import ALL_SCOPES as ALL_SCOPES
from authserver.scopes import READ as READ
from authserver.scopes import WRITE as WRITE
from notebook.sql import driver
from notebook.sql.converters import ModelColumns
from notebook.writers import UNKNOWN_WRITER, Writer

# Where the HTTP guard leaves the checked grant in the ASGI scope for the tool handler.
GRANT_SCOPE_KEY = "codex.grant"
# Where it leaves, instead, the token whose check it deferred to the tool handler.
DEFERRED_SCOPE_KEY = "codex.deferred"


class TokenRejected(Exception):
    """The bearer token cannot be used here; ``description`` is safe to show the client."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


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


@dataclass
class DeferredCheck:
    """A tool call whose token the HTTP guard has not checked yet: the tool handler
    checks it (``raw_token``) afresh right before the service and records the outcome
    here for the guard, which turns a refusal into the HTTP answer."""

    raw_token: str
    tool: str
    checked: bool = False
    rejected: "TokenRejected | None" = None
    missing: list[str] = field(default_factory=list)  # scopes the token lacks for the tool
    outage: Exception | None = None  # the database failed during the check


def token_checksum(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


class _TokenQuery:
    """The token check's one query: the token's expiry, scopes and resource, its user, the
    user's codex and the application's id, client_id and name, in one statement.

    Written as SQL (built once per database from the models' metadata, so swapped models
    and quoting still hold) because the ORM spent more time compiling this three-join
    query on every call than the database spent answering it. Values go through the same
    converters the ORM applies, and rows become model instances as ``select_related``
    would make them (``notebook.rows``).
    """

    def __init__(self, alias: str) -> None:
        connection = connections[alias]
        quote = connection.ops.quote_name
        AccessToken = get_access_token_model()
        user_link = AccessToken._meta.get_field("user")
        application_link = AccessToken._meta.get_field("application")
        User, Application = user_link.related_model, application_link.related_model
        self.codex_link = User._meta.get_field("codex")  # the reverse one-to-one
        Codex = self.codex_link.related_model
        self.alias = alias
        self.token = ModelColumns(AccessToken, "t", connection, ("expires", "scope", "resource"))
        # Only what the check and the tool call use: the user's key and whether it is active,
        # the codex's key, owner and entry count (a search's walk window is sized by it). Both
        # instances defer the rest (read on access, as ``only()`` would), so the converters of
        # columns nobody reads do not run per call.
        user_columns = [
            field.name for field in User._meta.concrete_fields if field.primary_key or field.name == "is_active"
        ]
        self.user = ModelColumns(User, "u", connection, user_columns)
        self.codex = ModelColumns(Codex, "c", connection, ("id", self.codex_link.field.name, "entry_count"))
        self.application = ModelColumns(Application, "a", connection, ("id", "client_id", "name"))
        columns = self.token.sql + self.user.sql + self.codex.sql + self.application.sql
        self.sql = (
            f"SELECT {', '.join(columns)} FROM {quote(AccessToken._meta.db_table)} t"
            f" LEFT JOIN {quote(User._meta.db_table)} u"
            f" ON u.{quote(User._meta.pk.column)} = t.{quote(user_link.column)}"
            f" LEFT JOIN {quote(Codex._meta.db_table)} c"
            f" ON c.{quote(self.codex_link.field.column)} = u.{quote(self.codex_link.field.target_field.column)}"
            f" LEFT JOIN {quote(Application._meta.db_table)} a"
            f" ON a.{quote(Application._meta.pk.column)} = t.{quote(application_link.column)}"
            f" WHERE t.{quote(AccessToken._meta.get_field('token_checksum').column)} = %s"
        )

    def fetch(self, checksum: str) -> tuple[Any, ...] | None:
        """(expires, scope, resource, user or None, application or None), or None if no such token."""
        connection = connections[self.alias]
        row = driver.run(connection, self.sql, [checksum], driver.fetchone)
        if row is None:
            return None
        ends = [len(self.token)]
        for part in (self.user, self.codex):
            ends.append(ends[-1] + len(part))
        expires, scope, resource = self.token.convert(row[: ends[0]], connection)
        user = self.user.instance(row[ends[0] : ends[1]], connection)
        if user is not None:
            codex = self.codex.instance(row[ends[1] : ends[2]], connection)
            if codex is not None:
                self.codex_link.field.set_cached_value(codex, user)
            # As select_related does: a user without a codex answers user.codex without a query.
            self.codex_link.set_cached_value(user, codex)
        application = self.application.instance(row[ends[2] :], connection)
        return expires, scope, resource, user, application


_token_queries: dict[str, _TokenQuery] = {}


def check_token_checksum(checksum: str) -> TokenGrant:
    """Re-read the token from the database (one query) and check everything but scopes."""
    alias = router.db_for_read(get_access_token_model())
    query = _token_queries.get(alias)
    if query is None:
        query = _token_queries[alias] = _TokenQuery(alias)
    found = query.fetch(checksum)
    if found is None:
        # Unknown and revoked look the same: DOT deletes revoked access tokens.
        raise TokenRejected("The access token is not recognized or has been revoked")
    expires, scope, resource, user, application = found
    if not expires or timezone.now() >= expires:  # AccessToken.is_expired
        raise TokenRejected("The access token has expired")
    if resource != [settings.CODEX_RESOURCE_URL]:
        raise TokenRejected(f"The access token was not issued for {settings.CODEX_RESOURCE_URL}")
    if user is None or not user.is_active:
        raise TokenRejected("The access token's user cannot use this server")
    return TokenGrant(
        token_checksum=checksum,
        user=user,
        scopes=frozenset(scope.split()),
        application_id=application.pk if application is not None else None,
        client_id=application.client_id if application is not None else "",
        application_name=application.name if application is not None else "",
    )


def check_bearer_token(raw_token: str) -> TokenGrant:
    return check_token_checksum(token_checksum(raw_token))


def writer_of(grant: TokenGrant) -> Writer:
    """Who the notebook records as writing what this grant's call saves or updates: the
    token's application (an operator-minted token's is the operator application)."""
    if grant.application_id is None:
        # DOT allows a token without an application; none of ours has one, but say so honestly.
        return UNKNOWN_WRITER
    return Writer.application(
        application_id=grant.application_id,
        client_id=grant.client_id,
        name=grant.application_name,
        scopes=grant.scopes,
    )


def missing_scopes(grant: TokenGrant, needed: Iterable[str]) -> list[str]:
    return [scope for scope in ALL_SCOPES if scope in set(needed) - grant.scopes]


def tool_call_retry_after(checksum: str) -> int | None:
    """Count one tool call against the token's per-minute limit; seconds to wait once past it.

    Counted in the database cache, so every worker and host shares one count per token;
    each process adds its calls in batches (``ratelimit.allow_batched``: 1 % of the limit,
    so at most 1 % per process more calls than the limit pass in a minute).
    """
    ok, retry_after = ratelimit.allow_batched(
        "tool-calls", checksum, limit=settings.CODEX_TOOL_CALLS_PER_MINUTE, window_seconds=60
    )
    return None if ok else max(retry_after, 1)
