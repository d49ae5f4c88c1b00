"""An organization's SCIM credential: issued by the operator (``manage.py scim_credential``),
shown once, kept as its SHA-256 (as access tokens are), checked in one indexed lookup.

The credential is 256 random bits, so a fast hash is what it needs: guessing it is hopeless
whatever the hash costs, and a slow one (PBKDF2) would make every unauthenticated request cost
the server what a password check does. A wrong or missing credential costs one lookup.
"""

import hashlib
import hmac
import secrets

from django.utils import timezone

from authserver.enterprise.scim.models import Organization
from common.audit import audit
from common.inputs import bearer_credential

PREFIX = "codex_scim_"
# A presented credential longer than this is not one (issued ones are 54 characters).
MAX_LENGTH = 128


def checksum(credential: str) -> str:
    return hashlib.sha256(credential.encode("utf-8")).hexdigest()


def issue(*, organization: Organization) -> str:
    """A new credential for the organization, replacing any it had; returns it (shown once)."""
    credential = PREFIX + secrets.token_urlsafe(32)
    organization.credential_checksum = checksum(credential)
    organization.credential_issued_at = timezone.now()
    organization.save(update_fields=["credential_checksum", "credential_issued_at"])
    audit("scim.credential_issued", organization=organization.name)
    return credential


def revoke(*, organization: Organization) -> None:
    organization.credential_checksum = None
    organization.credential_issued_at = None
    organization.save(update_fields=["credential_checksum", "credential_issued_at"])
    audit("scim.credential_revoked", organization=organization.name)


def organization_for(authorization: str | None) -> Organization | None:
    """The organization whose credential an ``Authorization: Bearer`` header carries, or None."""
    credential = bearer_credential(authorization)
    if credential is None or len(credential) > MAX_LENGTH:
        return None
    presented = checksum(credential)
    organization = Organization.objects.filter(credential_checksum=presented).first()
    if organization is None or not hmac.compare_digest(organization.credential_checksum or "", presented):
        return None
    return organization
