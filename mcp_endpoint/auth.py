"""Bearer tokens at the MCP resource (contract 8): the endpoint's side of the check that
``authserver.token_check`` makes.

Every request is checked; a tool call is checked once, afresh, right before its service
runs. For a single ``tools/call`` POST the HTTP guard passes the token down unchecked (its
checksum in the ASGI scope, ``TOKEN_SCOPE_KEY``) and the tool handler checks it in the same
worker-thread hop as the service. The flow is one way: what the handler decides travels
back up in its answer only. A refusal is a tool result marked for the guard
(``REFUSAL_META``: ``mcp_endpoint.results.refusal_result``), which the guard, reading the
response on its way out, answers with 401/403/503 and the challenge instead; an answer the
SDK gave before the handler ran (a protocol error) makes the guard check the token itself.
For every other POST the guard checks the token and passes the grant down
(``GRANT_SCOPE_KEY``). The database judges the token on every call, so revocation, expiry
or a deactivated user take effect on the very next call: a write may confirm, in its own
statement, that the token is unchanged since its last check accepted it (``held_grant``: the
check and the write in one round trip), and is otherwise checked apart.
"""

from collections.abc import Iterable

from django.conf import settings

# The one door between the apps: the rest of mcp_endpoint takes the scope names
# (and the shared rate limiter) from here, and authserver (the lower app) never
# imports mcp_endpoint.
from authserver import last_used, ratelimit, token_check
from authserver.scopes import ALL_SCOPES as ALL_SCOPES
from authserver.scopes import READ as READ
from authserver.scopes import WRITE as WRITE
from authserver.token_check import Confirmation as Confirmation
from authserver.token_check import HeldGrant as HeldGrant
from authserver.token_check import ReadAhead as ReadAhead
from authserver.token_check import ScopesMissing as ScopesMissing
from authserver.token_check import TokenGrant as TokenGrant
from authserver.token_check import TokenRejected as TokenRejected
from authserver.token_check import token_checksum as token_checksum
from notebook.writers import UNKNOWN_WRITER, Writer

# Where the HTTP guard leaves the grant it checked, for the tool handler (which checks afresh).
GRANT_SCOPE_KEY = "codex.grant"
# Where it leaves, for a single tool call, the checksum of the token it did not check.
TOKEN_SCOPE_KEY = "codex.token"
# The key, in a tool result's ``_meta``, of a refusal the guard turns into the HTTP answer.
REFUSAL_META = "codex/refusal"


def check_token_checksum(checksum: str, scopes: Iterable[str] = (), ahead: ReadAhead | None = None) -> TokenGrant:
    """The token check (one query), by the token's checksum: raises ``TokenRejected`` (401),
    ``ScopesMissing`` (403) or a ``DatabaseError`` (503), or returns the grant. ``ahead``:
    the tool's read, made in the same statement (``authserver.token_check``)."""
    return token_check.check_access_token(checksum, scopes, ahead)


def held_grant(checksum: str, scopes: Iterable[str]) -> HeldGrant | None:
    """The grant this process holds for the token, unexpired and with ``scopes``, for a write's
    statement to confirm (``authserver.token_check.HeldGrant``); or None."""
    return token_check.held_grant(checksum, scopes)


def forget_held_grant(checksum: str) -> None:
    token_check.forget_held_grant(checksum)


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
    (``authserver.last_used``; written at most once a minute per application and person)."""
    last_used.LAST_USED.touch(grant.user.pk, grant.application_id)
