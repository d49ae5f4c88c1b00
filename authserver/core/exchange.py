"""Each grant is exchanged at most once: an authorization code for its first tokens, a refresh
token for the next pair (contract 8: token issuance holds under races).

The token endpoint checks a code or a refresh token first (DOT's validator, outside any
transaction) and issues tokens afterwards, in ``save_bearer_token``'s transaction. Any number of
requests can pass the check with the same code or token before the first of them issues, so the
check is made again where it counts: ``grant_hold``, first thing in that transaction, takes the
person's lock (``authserver.core.tokens.person_hold``, the lock revocations take first too), refuses
a person who may not hold tokens as read under it, and re-reads the code's or the refresh token's
row under its own lock. Whoever comes second finds it spent (or revoked meanwhile) and gets
``invalid_grant``; nothing is issued twice, nor to a person shut out meanwhile.

A code is spent in the transaction that issues its tokens (``code_redeemed``): its row is
deleted, and what it issued is recorded (``authserver.models.CodeRedemption``) for the code's
lifetime and ``REPLAY_MARGIN``. A second use in that time, whether it raced the first or came
later, revokes what the first issued (``code_replayed``: OAuth 2.1 §4.1.3, RFC 6749 §4.1.2),
through the one revocation (``access_revoke``, ``by="code_replay"``).

A refresh token that is rotated is marked revoked by DOT in that transaction. A request that
waited here for that rotation sent the token before it was rotated: it is refused, and is not
taken for a stolen token's reuse. One that presents it after the rotation committed is reuse,
and DOT's check revokes the whole family (``REFRESH_TOKEN_REUSE_PROTECTION``).
"""

import datetime as dt
import hashlib
from typing import Any

from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model

from authserver.core.revocation import access_revoke
from authserver.core.token_check import token_checksum
from authserver.core.tokens import person_hold, person_lock
from authserver.models import CodeRedemption

# How long after a code's expiry its second use still revokes what it issued: a client that
# retries an exchange whose answer it lost, or whoever holds a copy of the code, tries within
# minutes; after that a use is only refused, as any unknown code is.
REPLAY_MARGIN = dt.timedelta(minutes=10)
# Expired records deleted by each redemption: more than the one row it adds.
SWEPT_PER_REDEMPTION = 32


class GrantSpent(Exception):
    """The code or refresh token was exchanged, or revoked, while this request waited for it."""

    error = "invalid_grant"


def _key(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


def grant_hold(
    *, user_id: int | None, code: str | None = None, application: Any = None, refresh_token: str | None = None
) -> None:
    """First thing in the transaction that issues tokens: take the person's lock and raise
    ``PersonShutOut`` unless they may hold tokens as read under it (``tokens.person_hold``); then
    read the code (``code``, of ``application``) or the refresh token (``refresh_token``, the raw
    value the client sent) again under its row's lock, and raise ``GrantSpent`` if it is no longer
    there to be exchanged. The locks are held until the transaction ends, so a second exchange of
    the same grant waits here and then finds it spent.

    ``user_id``: the person the grant issues for (a headless agent's owner for its client
    credentials); None, a grant that names nobody, is refused."""
    person_hold(user_id=user_id)
    if code is not None:
        grant = get_grant_model().objects.select_for_update().filter(code=code, application=application)
        if grant.values_list("pk").first() is None:
            raise GrantSpent("This authorization code was used already")
    if refresh_token is not None:
        # Live as DOT's check wants it: not revoked, still paired with its access token.
        live = (
            get_refresh_token_model()
            .objects.select_for_update()
            .filter(token_checksum=token_checksum(refresh_token), revoked__isnull=True, access_token__isnull=False)
        )
        if live.values_list("pk").first() is None:
            raise GrantSpent("This refresh token was used or revoked while this request was made")


def code_redeemed(*, code: str, application: Any, user: Any, expires: dt.datetime, issued: dict[str, Any]) -> None:
    """In the transaction that issued ``issued`` (the token response's values) for ``code``, which
    ``expires`` then: spend the code (its row is deleted) and record what it issued, until its
    second use no longer matters. Sweeps a few records past that."""
    get_grant_model().objects.filter(code=code, application=application).delete()
    access_token_id = (
        get_access_token_model()
        .objects.filter(token_checksum=token_checksum(issued["access_token"]))
        .values_list("pk", flat=True)
        .first()
    )
    token_family = None
    if issued.get("refresh_token"):
        token_family = (
            get_refresh_token_model()
            .objects.filter(token_checksum=token_checksum(issued["refresh_token"]), revoked__isnull=True)
            .values_list("token_family", flat=True)
            .first()
        )
    CodeRedemption.objects.create(
        key=_key(code),
        application=application,
        user=user,
        access_token_id=access_token_id,
        token_family=token_family,
        expires_at=expires + REPLAY_MARGIN,
    )
    expired = (
        CodeRedemption.objects.filter(expires_at__lte=timezone.now())
        .order_by("expires_at")
        .values("pk")[:SWEPT_PER_REDEMPTION]
    )
    CodeRedemption.objects.filter(pk__in=expired).delete()


def code_replayed(*, code: str, application: Any) -> bool:
    """A code presented again (refused by the caller, ``invalid_grant``): revoke what its first use
    issued, if it was redeemed by ``application`` within its lifetime and ``REPLAY_MARGIN``. True
    when it had been; the record goes, so that the revocation happens once."""
    if not isinstance(code, str) or getattr(application, "pk", None) is None:
        return False
    record = (
        CodeRedemption.objects.filter(key=_key(code), application=application, expires_at__gt=timezone.now())
        .select_related("user", "application")
        .first()
    )
    if record is None:
        return False
    with transaction.atomic():
        person_lock(user_id=record.user_id)  # first, as every issuance and revocation takes it
        deleted, _ = CodeRedemption.objects.filter(pk=record.pk).delete()
        if not deleted:
            return False  # another use of the code revoked it a moment ago
        access_revoke(
            user=record.user,
            application=record.application,
            token_family=record.token_family,
            access_token_id=record.access_token_id,
            by="code_replay",
        )
    return True
