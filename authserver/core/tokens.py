"""Issuing tokens: operator tokens for headless agents, the lock that puts a person's issuances
and revocations in one order, and the one answer to "may this person hold tokens now". The MCP
endpoint only checks tokens (``mcp_endpoint.auth``); the token endpoint issues them through DOT's
validator (``authserver.oauth.validators``, each grant exchanged once: ``authserver.core.exchange``),
and every revocation is ``authserver.core.revocation.access_revoke``.

Whether a person may hold tokens is ``person_may_hold_tokens``, asked by every door: at use by the
token check (``authserver.core.token_check``), and at issuance under the person's lock
(``person_hold``) by every grant of the token endpoint (``exchange.grant_hold``: a code, a refresh
token, an ID-JAG, a headless agent's client credentials), by ``mint_access_token`` and by the
making of a headless agent (``authserver.clients.agents.agent_create``).
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


class PersonShutOut(Exception):
    """The person a token (or a headless agent) would be issued for may not hold tokens now
    (``person_may_hold_tokens``): nothing is issued. The token endpoint answers ``invalid_grant``
    (``unauthorized_client`` for the person's headless agent), in words of its own."""

    error = "invalid_grant"

    def __init__(self) -> None:
        super().__init__("the person is deactivated on this server")


def person_may_hold_tokens(person: AbstractBaseUser | None) -> bool:
    """Whether tokens may be issued to this person, and theirs used, now: the account exists and is
    active (deactivation by the admin's checkbox, ``user.save()`` or a bulk update, SCIM's
    deprovisioning and leaving all clear ``is_active``). The one answer: the token check asks it at
    every use, ``person_hold`` at every issuance."""
    return person is not None and person.is_active


def person_lock(*, user_id: int | None) -> AbstractBaseUser | None:
    """Lock the person's row until the transaction ends, the first lock every issuance and every
    revocation of their tokens takes (a no-op on SQLite, which runs one write transaction at a time);
    return the person as read under it (their key and ``is_active`` only), or None when there is none.

    So the two never interleave: a revocation waits for a grant being exchanged and then ends
    what it issued, and an exchange that waited for a revocation finds its code or refresh token
    gone. Taken first by both, before any token or agent row, so that neither can hold a row the
    other waits for. ``FOR NO KEY UPDATE``: the foreign keys of other rows naming the person (a
    tool call's last use, say) do not wait for it."""
    people = get_user_model().objects.select_for_update(no_key=True)
    return people.only("pk", "is_active").filter(pk=user_id).first()


def person_hold(*, user_id: int | None) -> None:
    """For an issuance: take the person's lock (``person_lock``) and raise ``PersonShutOut`` unless
    they may hold tokens as read under it. A deactivation or deprovisioning takes the same row's
    lock (its ``UPDATE``, then ``access_revoke``), so an issuance either finishes first, and what it
    issued is revoked, or waits and is refused here; never a token for a person shut out. No
    person (None, or an account gone) is refused too."""
    if not person_may_hold_tokens(person_lock(user_id=user_id)):
        raise PersonShutOut()


def mint_access_token(*, user: AbstractBaseUser, scopes: Iterable[str], lifetime: dt.timedelta) -> str:
    """Mint an access token bound to this server's resource, for a headless agent or a test;
    ``PersonShutOut`` when the person may not hold tokens now (nothing is stored then).

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
        # A revocation under way ends before this token begins; a person shut out gets none.
        person_hold(user_id=user.pk)
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
