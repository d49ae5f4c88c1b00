"""Bearer-token checks for the MCP resource (contract 8).

Tokens are django-oauth-toolkit access tokens, looked up by the SHA-256 checksum
DOT keeps (the token itself may be redacted at rest). A token is accepted only
if it exists, has not expired, is bound to exactly this server's resource, and
belongs to an active user. The same check runs twice per tool call: once at HTTP
level, and again ("afresh") right before the notebook service runs.
"""

import datetime as dt
import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
    set_token_value,
)

from mcp_endpoint.schemas import ALL_SCOPES

OPERATOR_APPLICATION_NAME = "Agent Codex operator tokens"


class TokenRejected(Exception):
    """The bearer token cannot be used here; ``description`` is safe to show the client."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


@dataclass(frozen=True)
class TokenGrant:
    """What a valid token grants: whose codex, and which scopes."""

    token_checksum: str
    user: AbstractBaseUser
    scopes: frozenset[str]


def token_checksum(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode("utf-8")).hexdigest()


def check_token_checksum(checksum: str) -> TokenGrant:
    """Re-read the token from the database and check everything but scopes."""
    AccessToken = get_access_token_model()
    # The codex rides along (a LEFT JOIN), saving the tool call a query.
    token = AccessToken.objects.select_related("user", "user__codex").filter(token_checksum=checksum).first()
    if token is None:
        # Unknown and revoked look the same: DOT deletes revoked access tokens.
        raise TokenRejected("The access token is not recognized or has been revoked")
    if token.is_expired():
        raise TokenRejected("The access token has expired")
    if token.resource != [settings.CODEX_RESOURCE_URL]:
        raise TokenRejected(f"The access token was not issued for {settings.CODEX_RESOURCE_URL}")
    if token.user is None or not token.user.is_active:
        raise TokenRejected("The access token's user cannot use this server")
    return TokenGrant(token_checksum=checksum, user=token.user, scopes=frozenset(token.scope.split()))


def check_bearer_token(raw_token: str) -> TokenGrant:
    return check_token_checksum(token_checksum(raw_token))


def missing_scopes(grant: TokenGrant, needed: Iterable[str]) -> list[str]:
    return [scope for scope in ALL_SCOPES if scope in set(needed) - grant.scopes]


def mint_access_token(*, user: AbstractBaseUser, scopes: Iterable[str], lifetime: dt.timedelta) -> str:
    """Mint an access token bound to this server's resource, for a headless agent or a test.

    Returns the raw token; only its checksum (and, unless DOT is told to redact it,
    the token) is stored.
    """
    scopes = sorted(set(scopes))
    unknown = set(scopes) - set(ALL_SCOPES)
    if unknown or not scopes:
        raise ValueError(f"scopes must be a non-empty subset of {' '.join(ALL_SCOPES)}")
    if lifetime.total_seconds() <= 0:
        raise ValueError("lifetime must be positive")
    Application = get_application_model()
    application, _ = Application.objects.get_or_create(
        name=OPERATOR_APPLICATION_NAME,
        defaults={
            "client_type": Application.CLIENT_CONFIDENTIAL,
            "authorization_grant_type": Application.GRANT_CLIENT_CREDENTIALS,
            "skip_authorization": False,
        },
    )
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(
        user=user,
        application=application,
        expires=timezone.now() + lifetime,
        scope=" ".join(scopes),
        resource=[settings.CODEX_RESOURCE_URL],
    )
    set_token_value(token, raw)
    token.save()
    return raw


@transaction.atomic
def revoke_tokens(*, user: AbstractBaseUser, application: object | None = None) -> tuple[int, int]:
    """Revoke a user's refresh and access tokens (only those of ``application``, if given).

    Returns (refresh tokens revoked, remaining access tokens deleted).
    """
    refresh_tokens = get_refresh_token_model().objects.filter(user=user, revoked__isnull=True)
    access_tokens = get_access_token_model().objects.filter(user=user)
    if application is not None:
        refresh_tokens = refresh_tokens.filter(application=application)
        access_tokens = access_tokens.filter(application=application)
    revoked = 0
    for refresh_token in refresh_tokens:
        refresh_token.revoke()  # DOT's own revoke also deletes its access token
        revoked += 1
    deleted, _ = access_tokens.delete()
    return revoked, deleted
