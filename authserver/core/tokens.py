"""Issuing tokens: operator tokens for headless agents, and the lock that puts a person's
issuances and revocations in one order. The MCP endpoint only checks tokens
(``mcp_endpoint.auth``); the token endpoint issues them through DOT's validator
(``authserver.oauth.validators``, each grant exchanged once: ``authserver.core.exchange``), and
every revocation is ``authserver.core.revocation.access_revoke``.
"""

import datetime as dt
import secrets
from collections.abc import Iterable

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    set_token_value,
)

from authserver.core.scopes import ALL_SCOPES
from common.audit import audit

# What a person reads after "written by" and on Connected applications (migration 0002 renamed it).
OPERATOR_APPLICATION_NAME = "a command-line token (mint_token)"


def person_lock(*, user_id: int) -> None:
    """Lock the person's row until the transaction ends, the first lock every issuance and every
    revocation of their tokens takes (a no-op on SQLite, which runs one write transaction at a time).

    So the two never interleave: a revocation waits for a grant being exchanged and then ends
    what it issued, and an exchange that waited for a revocation finds its code or refresh token
    gone. Taken first by both, before any token row, so that neither can hold a row the other
    waits for. ``FOR NO KEY UPDATE``: the foreign keys of other rows naming the person (a tool
    call's last use, say) do not wait for it."""
    get_user_model().objects.select_for_update(no_key=True).filter(pk=user_id).values_list("pk").first()


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
    with transaction.atomic():
        person_lock(user_id=user.pk)  # a revocation under way ends before this token begins
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
