"""The people an organization provisioned, as scim2-server's storage (``ScimStorage``): Django's
users and ``ProvisionedPerson`` rows, seen only through the organization that made them.

- Every read and write starts from ``ProvisionedPerson.objects.filter(organization=...)``: an id
  of another organization's person, or of an account no organization provisioned (a password
  account, an operator, someone who signed in first), is ``404``, as one that does not exist.
- A provisioned person who has since become staff or a superuser is the operator's: changing or
  deleting them is ``403``.
- ``active`` false ends everything at once (``leaving.shut_out``: the account deactivated, its
  tokens, grants and sessions deleted, in the same transaction as the change); a delete is the
  account's deletion (``leaving.account_delete``). Reactivating brings no token back.
- A request is one transaction (``operation``), and a change re-reads its row under a lock
  (``select_for_update``), so two concurrent PATCHes cannot lose one another's change.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from scim2_models import (
    ForbiddenException,
    Meta,
    NotFoundException,
    PreconditionFailedException,
    Resource,
    ResourceType,
    ResponseParameters,
    SearchRequest,
    UniquenessException,
)
from scim2_server.storage import ScimStorage, SearchPage

from authserver.enterprise.scim.filters import filter_q
from authserver.enterprise.scim.models import Organization, ProvisionedPerson
from authserver.enterprise.scim.schema import STORED_AS_SENT, PersonResource
from authserver.enterprise.scim.values import NAME_MAX, checked_email, checked_user_name, comparison_key
from authserver.people import leaving
from common.audit import audit

# In ``ProvisionedPerson.attributes``: whether the IdP gave ``active`` a value.
ACTIVE_ASSIGNED = "activeAssigned"


def _version(person: ProvisionedPerson) -> str:
    return f'W/"{person.version}"'


def resource_of(person: ProvisionedPerson) -> Resource[Any]:
    """The person as SCIM answers them."""
    user = person.user
    data: dict[str, Any] = {
        "schemas": [str(PersonResource.__schema__)],
        "id": str(person.scim_id),
        "userName": user.username,
        **{key: value for key, value in person.attributes.items() if key in STORED_AS_SENT},
    }
    # An active person whose IdP left ``active`` unassigned (never sent, or removed: RFC 7644
    # §3.5.2.2) is answered without it; the account is active either way.
    if not user.is_active or person.attributes.get(ACTIVE_ASSIGNED, True):
        data["active"] = user.is_active
    if person.external_id:
        data["externalId"] = person.external_id
    resource = PersonResource.model_validate(data)
    resource.meta = Meta(
        resource_type="User", created=person.created_at, last_modified=person.modified_at, version=_version(person)
    )
    return resource


def _primary_email(resource: Resource[Any]) -> str:
    emails = resource.emails or []
    primary = next((email for email in emails if email.primary), emails[0] if emails else None)
    return (primary.value or "") if primary is not None else ""


class PeopleStorage(ScimStorage):
    """The people of ``organization``."""

    def __init__(self, organization: Organization) -> None:
        self.organization = organization

    def operation(self) -> Any:
        return transaction.atomic()

    def _people(self) -> Any:
        return ProvisionedPerson.objects.filter(organization=self.organization).select_related("user")

    def _person(self, resource_id: str | None, *, lock: bool = False) -> ProvisionedPerson:
        people = self._people()
        if lock:
            people = people.select_for_update(of=("self",))
        try:
            return people.get(scim_id=resource_id)
        except (ProvisionedPerson.DoesNotExist, ValidationError, ValueError, TypeError):
            # A malformed id is one that does not exist.
            raise NotFoundException(detail="No such person in this organization") from None

    def _checked(self, resource: Resource[Any]) -> dict[str, Any]:
        """The values to store of a person as written, or ``invalidValue``."""
        domains = list(self.organization.domains)
        for email in resource.emails or []:
            checked_email(email.value or "", domains)
        name = resource.name
        return {
            "username": checked_user_name(resource.user_name or ""),
            "email": _primary_email(resource),
            "first_name": ((name.given_name if name else None) or "")[:NAME_MAX],
            "last_name": ((name.family_name if name else None) or "")[:NAME_MAX],
            "external_id": resource.external_id or "",
            "attributes": {
                **resource.model_dump(include={"name", "display_name", "emails"}),
                ACTIVE_ASSIGNED: resource.active is not None,
            },
        }

    def _taken(self, username: str, but: int | None = None) -> None:
        others = get_user_model().objects.filter(username__iexact=username)
        if but is not None:
            others = others.exclude(pk=but)
        if others.exists():
            raise UniquenessException(detail="userName is already taken on this server")

    def get(
        self,
        resource_type: ResourceType,
        resource_id: str,
        *,
        response_parameters: ResponseParameters[Any] | None = None,
    ) -> Resource[Any]:
        # Under a lock: a PATCH reads the person here, then writes them back (``update``).
        return resource_of(self._person(resource_id, lock=True))

    def search(
        self, resource_types: list[ResourceType], search_request: SearchRequest[Any], *, position: Any = None
    ) -> SearchPage:
        people = self._people()
        if search_request.filter is not None:
            people = people.filter(filter_q(search_request.filter.ast))
        people = people.order_by("created_at", "pk")
        start = (search_request.start_index or 1) - 1
        count = search_request.count
        total = people.count()
        page = people[start : start + count] if count is not None else people[start:]
        return SearchPage(total, [resource_of(person) for person in page])

    def create(self, resource_type: ResourceType, resource: Resource[Any]) -> Resource[Any]:
        values = self._checked(resource)
        self._taken(values["username"])
        now = timezone.now()
        try:
            with transaction.atomic():
                user = get_user_model()(
                    username=values["username"],
                    email=values["email"],
                    first_name=values["first_name"],
                    last_name=values["last_name"],
                    is_active=resource.active is not False,
                )
                user.set_unusable_password()  # they sign in through single sign-on
                user.save()
                person = ProvisionedPerson.objects.create(
                    user=user,
                    organization=self.organization,
                    user_name_key=comparison_key(values["username"]),
                    external_id=values["external_id"],
                    attributes=values["attributes"],
                    created_at=now,
                    modified_at=now,
                )
        except IntegrityError:
            raise UniquenessException(detail="userName or externalId is already taken") from None
        audit("person.provisioned", user_id=user.pk, organization=self.organization.name, active=user.is_active)
        return resource_of(person)

    def update(
        self, resource_type: ResourceType, resource: Resource[Any], *, expected_version: str | None = None
    ) -> Resource[Any]:
        person = self._person(resource.id, lock=True)
        if expected_version is not None and expected_version != _version(person):
            raise PreconditionFailedException(detail="The person has changed since that version")
        user = person.user
        self._operators_own(user)
        values = self._checked(resource)
        if values["username"] != user.username:
            self._taken(values["username"], but=user.pk)
        active = resource.active is not False
        was_active = user.is_active
        try:
            with transaction.atomic():
                get_user_model().objects.filter(pk=user.pk).update(
                    username=values["username"],
                    email=values["email"],
                    first_name=values["first_name"],
                    last_name=values["last_name"],
                    is_active=active,
                )
                ProvisionedPerson.objects.filter(pk=person.pk).update(
                    user_name_key=comparison_key(values["username"]),
                    external_id=values["external_id"],
                    attributes=values["attributes"],
                    version=person.version + 1,
                    modified_at=timezone.now(),
                )
        except IntegrityError:
            raise UniquenessException(detail="userName or externalId is already taken") from None
        organization = self.organization.name
        if was_active and not active:
            leaving.shut_out(user=user, by="deprovisioning")
            audit("person.deactivated", user_id=user.pk, organization=organization)
        elif active and not was_active:
            audit("person.reactivated", user_id=user.pk, organization=organization)
        else:
            audit("person.updated", user_id=user.pk, organization=organization)
        return resource_of(self._person(resource.id))

    def delete(self, resource_type: ResourceType, resource_id: str, *, expected_version: str | None = None) -> None:
        person = self._person(resource_id, lock=True)
        if expected_version is not None and expected_version != _version(person):
            raise PreconditionFailedException(detail="The person has changed since that version")
        user = person.user
        self._operators_own(user)
        report = leaving.account_delete(user=user, by="deprovisioning")
        audit("person.deleted", user_id=report.user_id, organization=self.organization.name)

    @staticmethod
    def _operators_own(user: Any) -> None:
        if user.is_staff or user.is_superuser:
            raise ForbiddenException(detail="This account is an operator's: it is managed on this server, not by SCIM")
