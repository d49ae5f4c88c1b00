"""Ending access: the one revocation, which every door that ends someone's access calls.

``access_revoke`` ends, in one transaction with one ``token.revoked`` audit line saying ``by``
whom, one of three scopes:

- **a person's access** (no application): every token of theirs, for every application, and
  every browser session signed in as them. The operator (``manage.py revoke_tokens``),
  deactivation (``authserver.signals``: the admin's checkbox, ``user.save()``), SCIM's
  deprovisioning and deleting the account (``authserver.people.leaving.shut_out``).
- **a person's access for one application**: the person on Connected applications
  (``authserver.people.connected``), a headless agent's revocation (``agents.agent_revoke``, by
  its owner or by a superuser in the admin), an organization's grant (an ID-JAG's, shown there as
  "granted by your organization").
- **what one authorization code issued** (``token_family``): its access token and every refresh
  token descended from it, when the code is used a second time (``authserver.core.exchange``).

Within its scope it deletes access tokens, refresh tokens, unused authorization codes (DOT's
``Grant``), ID tokens and organization grants. A refresh token is **deleted**, not marked
revoked: marking keeps a row so that a rotated token presented again can revoke its family
(DOT's reuse protection), but after a revocation no token of the scope is left alive to protect,
and a deleted token is refused (``invalid_grant``) as a revoked one is. Deleting leaves no rows to
sweep, and Connected applications' "connected on" starts again when the person reconnects.

It takes the person's lock first (``authserver.core.tokens.person_lock``), which every issuance
for the person takes first too: a grant being exchanged finishes before the revocation reads
what to delete, and one that waited for the revocation finds its code or refresh token gone.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from django.contrib.sessions.models import Session
from django.db import transaction
from django.db.models import Q
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from authserver.core.tokens import person_lock
from authserver.models import OrganizationGrant
from common.audit import audit

# Who revokes, as the audit line says (``by``): the person on Connected applications, an
# operator (revoke_tokens, the admin's agent list), a deactivation, SCIM's deprovisioning, the
# account's deletion, a code used twice. (A client revoking its own token at /o/revoke_token/ is
# DOT's revocation of that token, with its own line, ``by=client``.)
REVOKED_BY = ("person", "operator", "deactivation", "deprovisioning", "account_deletion", "code_replay")

SESSION_BATCH = 500


@dataclass(frozen=True)
class Revoked:
    """What a revocation deleted, by kind."""

    access_tokens: int = 0
    refresh_tokens: int = 0
    codes: int = 0
    id_tokens: int = 0
    organization_grants: int = 0
    sessions: int = 0

    @property
    def rows(self) -> int:
        """Tokens, codes and grants (sessions apart)."""
        return self.access_tokens + self.refresh_tokens + self.codes + self.id_tokens + self.organization_grants


@transaction.atomic
def access_revoke(
    *,
    user: Any,
    by: str,
    application: Any | None = None,
    token_family: uuid.UUID | None = None,
    access_token_id: int | None = None,
) -> Revoked:
    """End ``user``'s access: all of it (no ``application``), for one ``application``, or what one
    authorization code issued there (``token_family`` and the first ``access_token_id``), as the
    module's docstring says; one ``token.revoked`` line with ``by`` (one of ``REVOKED_BY``).

    Every token a grant being exchanged for this person is issuing is revoked too: the person's
    lock makes that exchange finish first."""
    if by not in REVOKED_BY:
        raise ValueError(f"by must be one of {', '.join(REVOKED_BY)}")
    if (token_family is not None or access_token_id is not None) and application is None:
        raise ValueError("what a code issued is revoked for its application")
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    person_lock(user_id=user.pk)
    scope = Q(user=user) if application is None else Q(user=user, application=application)
    issued_by_code = token_family is not None or access_token_id is not None

    refresh_tokens = RefreshToken.objects.filter(scope)
    if issued_by_code:
        refresh_tokens = refresh_tokens.filter(token_family=token_family)
    # Refresh tokens before access tokens: the order a rotation and DOT's RFC 7009 revocation lock
    # them in, so that neither can hold a row this waits for while waiting for one held here.
    locked = list(refresh_tokens.select_for_update().order_by("pk").values_list("pk", "access_token_id"))
    access_tokens = AccessToken.objects.filter(scope)
    id_tokens = get_id_token_model().objects.filter(scope)
    if issued_by_code:
        access_tokens = access_tokens.filter(
            Q(pk=access_token_id) | Q(pk__in=[paired for _, paired in locked if paired is not None])
        )
        id_tokens = id_tokens.filter(pk__in=access_tokens.exclude(id_token=None).values("id_token_id"))
    id_token_ids = list(id_tokens.values_list("pk", flat=True))

    access, _ = access_tokens.delete()
    refresh, _ = RefreshToken.objects.filter(pk__in=[pk for pk, _ in locked]).delete()
    # An ID token's deletion would cascade to its access token: those went first, above.
    id_deleted, _ = get_id_token_model().objects.filter(pk__in=id_token_ids).delete()
    codes = grants = 0
    if not issued_by_code:
        codes, _ = get_grant_model().objects.filter(scope).delete()
        # An organization's grant (an ID-JAG's) goes with the tokens: the application is no
        # longer connected, until the organization's IdP grants it again.
        grants, _ = OrganizationGrant.objects.filter(scope).delete()
    sessions = 0
    if application is None:
        keys = _sessions_of(user)
        sessions, _ = Session.objects.filter(session_key__in=keys).delete()
    audit(
        "token.revoked",
        user_id=user.pk,
        client_id=getattr(application, "client_id", None),
        by=by,
        refresh_tokens=refresh,
        access_tokens=access,
    )
    return Revoked(
        access_tokens=access,
        refresh_tokens=refresh,
        codes=codes,
        id_tokens=id_deleted,
        organization_grants=grants,
        sessions=sessions,
    )


def _sessions_of(user: Any) -> list[str]:
    """The keys of every session signed in as this person (sessions are stored encoded, so each
    is read; in batches, so memory stays flat)."""
    keys, last = [], ""
    wanted = str(user.pk)
    while True:
        batch = list(Session.objects.filter(session_key__gt=last).order_by("session_key")[:SESSION_BATCH])
        if not batch:
            return keys
        for session in batch:
            try:
                data = session.get_decoded()
            except Exception:  # a session that cannot be read signs nobody in
                continue
            if str(data.get("_auth_user_id", "")) == wanted:
                keys.append(session.session_key)
        last = batch[-1].session_key
