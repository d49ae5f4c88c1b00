"""Bearer tokens at the MCP resource (contract 8): the endpoint's side of the check that
``authserver.core.token_check`` makes.

Each request's token is a ``RequestToken`` that the HTTP guard puts in the ASGI scope
(``TOKEN_SCOPE_KEY``). Its ``check`` is the one way to a grant: one query, made in a worker
thread, the first outcome kept as the request's. A tool handler checks right before its
service, in the service's own worker-thread hop; the guard (``mcp_endpoint.http``) lets no
answer out until the request's token has been checked, checking it then if no handler did, and
answers a refused first check with 401/403/503 instead of whatever was answered. A check that
refuses after the first passed (a later call of a 2025-03-26 batch) is that call's notebook
error (``unauthenticated``, ``permission_denied``, ``unavailable``). The database judges the
token on every call, so revocation, expiry or a deactivated user take effect on the very next
call.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass

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
from authserver.core.token_check import TokenRejected as TokenRejected
from authserver.core.token_check import token_checksum as token_checksum
from common import ratelimit
from common.outage import log_database_unavailable
from notebook.exceptions import NotebookError, PermissionDenied, Unauthenticated, Unavailable
from notebook.writers import UNKNOWN_WRITER, Writer

logger = logging.getLogger(__name__)

# Where the HTTP guard leaves the request's token (a ``RequestToken``) for the tool handlers.
TOKEN_SCOPE_KEY = "codex.token"


@dataclass(frozen=True)
class Refusal:
    """A check's refusal: the HTTP answer (401, 403 or 503) when it is the request's first
    check, else the call's notebook error (``error``)."""

    status: int
    description: str
    needed: tuple[str, ...] = ()  # the scopes the check asked for (403: the challenge names them)

    def error(self) -> NotebookError:
        return _REFUSED_AS[self.status](self.description)


_REFUSED_AS: dict[int, type[NotebookError]] = {401: Unauthenticated, 403: PermissionDenied, 503: Unavailable}


def in_order(scopes: Iterable[str]) -> list[str]:
    """``scopes`` as the metadata lists them (notes:read before notes:write), each once."""
    wanted = set(scopes)
    return [scope for scope in ALL_SCOPES if scope in wanted]


def check(checksum: str, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant | Refusal:
    """The token check (one query; in a worker thread): the grant, or the refusal.
    ``ahead``: the tool's read, made in the same statement (``authserver.core.token_check``)."""
    needed = in_order(scopes)
    try:
        return check_token_checksum(checksum, needed, ahead)
    except TokenRejected as rejected:
        return Refusal(401, rejected.description)
    except ScopesMissing as lacking:
        return Refusal(403, f"This call needs the scope {' '.join(lacking.missing)}", tuple(needed))
    except DatabaseError as error:
        log_database_unavailable(logger, "token check", error)
        return Refusal(503, "The server cannot check tokens right now; retry shortly")


class RequestToken:
    """One request's bearer token, and the outcome of its first check, which is the request's
    answer to whether the token is good (the module's docstring). ``scopes``: what every call
    the request's body makes needs; each check asks for them, and for its own tool's."""

    __slots__ = ("checksum", "first", "scopes")

    def __init__(self, checksum: str, scopes: Iterable[str] = ()) -> None:
        self.checksum = checksum
        self.scopes = frozenset(scopes)
        self.first: TokenGrant | Refusal | None = None

    @classmethod
    def checked(cls, grant: TokenGrant) -> "RequestToken":
        """A request whose first check gave ``grant`` (for callers of a handler outside HTTP)."""
        token = cls(grant.token_checksum)
        token.first = grant
        return token

    def check(self, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant | Refusal:
        """Check the token afresh (one query), for ``scopes`` and the request's own. Once the
        request's first check has refused, so does every later one, without a query."""
        if isinstance(self.first, Refusal):
            return self.first
        outcome = check(self.checksum, self.scopes.union(scopes), ahead)
        if self.first is None:
            self.first = outcome
        return outcome

    def grant(self, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant:
        """``check``'s grant; a refusal raised as its notebook error."""
        outcome = self.check(scopes, ahead)
        if isinstance(outcome, Refusal):
            raise outcome.error()
        return outcome


def check_token_checksum(checksum: str, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant:
    """The token check (one query), by the token's checksum: raises ``TokenRejected`` (401),
    ``ScopesMissing`` (403) or a ``DatabaseError`` (503), or returns the grant."""
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
