"""Each grant is exchanged at most once: an authorization code for its first tokens, a refresh
token for the next pair (contract 8: token issuance holds under races).

The token endpoint checks a code or a refresh token first (DOT's validator, outside any
transaction) and issues tokens afterwards, in ``save_bearer_token``'s transaction. Any number of
requests can pass the check with the same code or token before the first of them issues, so the
check is made again where it counts: ``grant_hold``, first thing in that transaction, takes the
person's lock (``authserver.core.tokens.person_lock``, which revocations take first too) and
re-reads the code's or the refresh token's row under its own lock. Whoever comes second finds it
spent (or revoked meanwhile) and gets ``invalid_grant``; nothing is issued twice.

A code is spent in the transaction that issues its tokens (``code_redeemed``): its row is
deleted there, not after that transaction as DOT deletes it.

A refresh token that is rotated is marked revoked by DOT in that transaction. A request that
waited here for that rotation sent the token before it was rotated: it is refused, and is not
taken for a stolen token's reuse. One that presents it after the rotation committed is reuse,
and DOT's check revokes the whole family (``REFRESH_TOKEN_REUSE_PROTECTION``).
"""

from typing import Any

from oauth2_provider.models import get_grant_model, get_refresh_token_model

from authserver.core.token_check import token_checksum
from authserver.core.tokens import person_lock


class GrantSpent(Exception):
    """The code or refresh token was exchanged, or revoked, while this request waited for it."""

    error = "invalid_grant"


def grant_hold(
    *, user_id: int | None, code: str | None = None, application: Any = None, refresh_token: str | None = None
) -> None:
    """First thing in the transaction that issues tokens: take the person's lock, then read the
    code (``code``, of ``application``) or the refresh token (``refresh_token``, the raw value the
    client sent) again under its row's lock, and raise ``GrantSpent`` if it is no longer there to
    be exchanged. The locks are held until the transaction ends, so a second exchange of the same
    grant waits here and then finds it spent.

    ``user_id`` None: a grant that names no person before it issues (a headless agent's
    client credentials, read under the agent's own lock in the validator)."""
    if user_id is not None:
        person_lock(user_id=user_id)
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


def code_redeemed(*, code: str, application: Any) -> None:
    """In the transaction that issued the code's tokens: spend it (its row is deleted)."""
    get_grant_model().objects.filter(code=code, application=application).delete()
