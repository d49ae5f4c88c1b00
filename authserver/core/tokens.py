"""Issuing and revoking tokens: operator tokens for headless agents, and revocation for
the ``revoke_tokens`` command and the connected-applications page. The MCP endpoint
only checks tokens (``mcp_endpoint.auth``); everything that writes them lives here.
"""

import datetime as dt
import secrets
from collections.abc import Iterable

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

from authserver.core.scopes import ALL_SCOPES
from common.audit import audit

# What a person reads after "written by" and on Connected applications (migration 0002 renamed it).
OPERATOR_APPLICATION_NAME = "a command-line token (mint_token)"


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
    audit(
        "token.granted",
        user_id=user.pk,
        client_id=application.client_id,
        grant_type="mint_token",
        scopes=scopes,
        access_token_id=token.pk,
        expires=token.expires.isoformat(),
    )
    return raw


# Who revokes, as the audit line says (``by``).
REVOKED_BY = ("person", "operator", "client", "deactivation", "deprovisioning", "account_deletion")


@transaction.atomic
def revoke_tokens(*, user: AbstractBaseUser, by: str, application: object | None = None) -> tuple[int, int]:
    """Revoke a user's refresh and access tokens (only those of ``application``, if given),
    and write the audit line (``by``: one of ``REVOKED_BY``).

    Returns (refresh tokens revoked, remaining access tokens deleted).
    """
    if by not in REVOKED_BY:
        raise ValueError(f"by must be one of {', '.join(REVOKED_BY)}")
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
    # An organization's grant (an ID-JAG's) goes with the tokens: the application is no longer
    # connected, until the organization's IdP grants it again.
    from authserver.models import OrganizationGrant

    grants = OrganizationGrant.objects.filter(user=user)
    (grants if application is None else grants.filter(application=application)).delete()
    audit(
        "token.revoked",
        user_id=user.pk,
        client_id=getattr(application, "client_id", None),
        by=by,
        refresh_tokens=revoked,
        access_tokens=deleted,
    )
    return revoked, deleted
