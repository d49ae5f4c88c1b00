"""Who provisions whom: organizations, each with one SCIM credential, and the people each
provisioned (``authserver.enterprise.scim``)."""

import uuid

from django.conf import settings
from django.db import models


class Organization(models.Model):
    """An identity provider's tenant that provisions people here through SCIM.

    Its credential is a high-entropy bearer secret the operator issues (``manage.py
    scim_credential issue``) and hands to the IdP; only its SHA-256 is kept, as access tokens'
    are, and a new one replaces the old at once. An organization sees and changes only the
    people it provisioned (``ProvisionedPerson``), never another organization's, nor any
    account made otherwise (a password account, an operator, a person who signed in first).
    """

    name = models.SlugField(max_length=64, unique=True)
    # The CODEX_OIDC_PROVIDERS id its people sign in with: their first single sign-on through it
    # finds the provisioned account (authserver.enterprise.scim.links). Blank: none.
    provider_id = models.CharField(max_length=64, blank=True)
    # The e-mail domains its people's addresses must be at (lowercase; ["*"]: any).
    domains = models.JSONField(default=list)
    credential_checksum = models.CharField(max_length=64, unique=True, null=True, blank=True)
    credential_issued_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class ProvisionedPerson(models.Model):
    """A person an organization provisioned: the account and what SCIM says of it beyond
    Django's user (its SCIM id, externalId and the attributes the IdP sent)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="provisioned")
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="people")
    # The SCIM id: random, not the account's key (which would tell how many accounts there are).
    scim_id = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    # userName as SCIM compares it (RFC 7643 §4.1.1: caseExact false, unique on the server):
    # NFC, lowercase. Unique here too, so that two concurrent creations cannot both win.
    user_name_key = models.CharField(max_length=150, unique=True)
    external_id = models.CharField(max_length=255, blank=True)
    # name, displayName and emails as last written (authserver.enterprise.scim.schema.KEPT).
    attributes = models.JSONField(default=dict)
    version = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField()
    modified_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "external_id"],
                condition=~models.Q(external_id=""),
                name="scim_provisionedperson_external_id_unique_per_organization",
            ),
            models.CheckConstraint(condition=models.Q(version__gte=1), name="scim_provisionedperson_version_positive"),
        ]
        indexes = [models.Index(fields=["organization", "scim_id"], name="scim_person_by_organization")]

    def __str__(self) -> str:
        return f"{self.user_id} of {self.organization_id}"
