"""Bearer tokens at the MCP resource (contract 8): the endpoint's side of the check that
``authserver.core.token_check`` makes.

Each request's token is a ``RequestToken`` that the HTTP guard (``mcp_endpoint.http``) hands
down in the ASGI scope (``TOKEN_SCOPE_KEY``). Its ``check`` is the one way to a grant: one
query, made in a worker thread, which returns the grant or raises the refusal
(``token_check.TokenRefused``: one class per refusal, with its HTTP status and its notebook
error code). The guard checks every request's token before anything is answered; a tool call
checks it again right before its service, in the service's own worker-thread hop. When the
guard hands a request's one tool call down unchecked (``answers_request``: the call's check is
the request's first), a refusal of that check reaches the guard as the request's 401/403/503;
any other refusal is the call's notebook error (``unauthenticated``, ``permission_denied``,
``unavailable``). The database judges the token on every call, so revocation, expiry or a
deactivated user take effect on the very next call.
"""

import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import DatabaseError

# The one door between the apps: the rest of mcp_endpoint takes the scope names
# (and the shared rate limiter) from here, and authserver (the lower app) never
# imports mcp_endpoint.
from authserver.core import last_used, token_check
from authserver.core.scopes import ALL_SCOPES as ALL_SCOPES
from authserver.core.scopes import READ as READ
from authserver.core.scopes import WRITE as WRITE
from authserver.core.token_check import ReadAhead as ReadAhead
from authserver.core.token_check import ScopesMissing as ScopesMissing
from authserver.core.token_check import TokenGrant as TokenGrant
from authserver.core.token_check import TokenMissing as TokenMissing
from authserver.core.token_check import TokenRefused as TokenRefused
from authserver.core.token_check import TokenRejected as TokenRejected
from authserver.core.token_check import TokensUnavailable as TokensUnavailable
from authserver.core.token_check import token_checksum as token_checksum
from common import ratelimit
from common.outage import log_database_unavailable
from notebook.writers import UNKNOWN_WRITER, Writer

logger = logging.getLogger(__name__)

# Where the HTTP guard leaves the request's token (a ``RequestToken``) for the tool handlers.
TOKEN_SCOPE_KEY = "codex.token"


def in_order(scopes: Iterable[str]) -> list[str]:
    """``scopes`` as the metadata lists them (notes:read before notes:write), each once."""
    wanted = set(scopes)
    return [scope for scope in ALL_SCOPES if scope in wanted]


def check(checksum: str, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant:
    """The token check (one query; in a worker thread): the grant, or a ``TokenRefused`` raised
    (a database that cannot answer is ``TokensUnavailable``, logged as the outage it is).
    ``ahead``: the tool's read, made in the same statement (``authserver.core.token_check``)."""
    try:
        return check_token_checksum(checksum, in_order(scopes), ahead)
    except DatabaseError as error:
        log_database_unavailable(logger, "token check", error)
        raise TokensUnavailable() from None


class RequestToken:
    """One request's bearer token as the guard hands it down: its checksum, the scopes every
    call the request's body makes needs (each check asks for them, and for its own tool's), and
    whether a refusal of a call's check answers the request (``answers_request``: the guard
    left the check to the request's one tool call, the module's docstring). Nothing below
    writes into it."""

    __slots__ = ("answers_request", "checksum", "scopes")

    def __init__(self, checksum: str, scopes: Iterable[str] = (), *, answers_request: bool = False) -> None:
        self.checksum = checksum
        self.scopes = frozenset(scopes)
        self.answers_request = answers_request

    def check(self, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant:
        """Check the token afresh (one query), for ``scopes`` and the request's own."""
        return check(self.checksum, self.scopes.union(scopes) if scopes else self.scopes, ahead)


def check_token_checksum(checksum: str, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant:
    """The token check (one query), by the token's checksum: raises ``TokenRejected`` (401),
    ``ScopesMissing`` (403) or a ``DatabaseError``, or returns the grant."""
    return token_check.check_access_token(checksum, scopes, ahead)


def check_bearer_token(raw_token: str, scopes: Iterable[str] = ()) -> TokenGrant:
    return check_token_checksum(token_checksum(raw_token), scopes)


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


def note_use(grant: TokenGrant) -> None:
    """A tool call ran for this grant: its application's last use, to the minute
    (``authserver.core.last_used``; written at most once a minute per application and person)."""
    last_used.LAST_USED.touch(grant.user.pk, grant.application_id)
