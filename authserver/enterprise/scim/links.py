"""A provisioned person's first single sign-on: how the IdP's sign-in finds the account its
SCIM provisioning made (docs/deploy.md, "SCIM provisioning").

Single sign-on finds a person by the provider's subject (allauth's ``SocialAccount``: provider
id and ``sub``). A provisioned person has none until they first sign in, so that first sign-in
through the provider their organization names (``Organization.provider_id``) is matched to the
person that organization provisioned whom one of the verified, allowed addresses the provider gave
names (``authserver.enterprise.addresses``: its e-mail address, its userName or an address allauth
keeps for it, case-insensitively); the subject is then linked to
that account, and every later sign-in finds it by the subject alone. Only that organization's
people are candidates, only through its own provider, and never an account already linked to
another subject of that provider, nor an operator's. A first ID-JAG from that provider finds
the person the same way, by the ID-JAG's ``email`` when it says ``email_verified: true``
(``authserver.enterprise.id_jag``).
"""

from typing import Any

from authserver.enterprise.addresses import accounts_named_by
from authserver.enterprise.scim.models import ProvisionedPerson


def provisioned_account(*, provider_id: str, emails: list[str]) -> Any | None:
    """The account provisioned for the person signing in through ``provider_id`` for the first
    time with these verified, allowed addresses, or None."""
    if not emails:
        return None
    people = (
        ProvisionedPerson.objects.filter(organization__provider_id=provider_id)
        .filter(user__in=accounts_named_by(emails))
        .filter(user__is_staff=False, user__is_superuser=False)
        .exclude(user__socialaccount__provider=provider_id)
        .select_related("user")
    )
    found = list(people[:2])
    return found[0].user if len(found) == 1 else None
