"""Bearer-token checks for the MCP resource (contract 8).

Tokens are django-oauth-toolkit access tokens, looked up by the SHA-256 checksum
DOT keeps (the token itself may be redacted at rest). A token is accepted only
if it exists, has not expired, is bound to exactly this server's resource, and
belongs to an active user. The same check runs twice per tool call: once at HTTP
level, and again ("afresh") right before the notebook service runs.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from oauth2_provider.models import get_access_token_model

# The one door between the apps: the rest of mcp_endpoint takes the scope names
# (and the shared rate limiter) from here, and authserver (the lower app) never
# imports mcp_endpoint.
from authserver import ratelimit
from authserver.scopes import ALL_SCOPES as ALL_SCOPES
from authserver.scopes import READ as READ
from authserver.scopes import WRITE as WRITE
from notebook.writers import UNKNOWN_WRITER, Writer

# Where the HTTP guard leaves the checked grant in the ASGI scope for the tool handler.
GRANT_SCOPE_KEY = "codex.grant"


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


def token_checksum(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


def check_token_checksum(checksum: str) -> TokenGrant:
    """Re-read the token from the database and check everything but scopes."""
    AccessToken = get_access_token_model()
    # The codex and the application ride along (LEFT JOINs): one query for the whole check.
    token = (
        AccessToken.objects.select_related("user", "user__codex", "application").filter(token_checksum=checksum).first()
    )
    if token is None:
        # Unknown and revoked look the same: DOT deletes revoked access tokens.
        raise TokenRejected("The access token is not recognized or has been revoked")
    if token.is_expired():
        raise TokenRejected("The access token has expired")
    if token.resource != [settings.CODEX_RESOURCE_URL]:
        raise TokenRejected(f"The access token was not issued for {settings.CODEX_RESOURCE_URL}")
    if token.user is None or not token.user.is_active:
        raise TokenRejected("The access token's user cannot use this server")
    application = token.application
    return TokenGrant(
        token_checksum=checksum,
        user=token.user,
        scopes=frozenset(token.scope.split()),
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

    Counted in the database cache, so every worker and host shares one count per token.
    """
    ok, retry_after = ratelimit.allow(
        "tool-calls", checksum, limit=settings.CODEX_TOOL_CALLS_PER_MINUTE, window_seconds=60
    )
    return None if ok else max(retry_after, 1)
