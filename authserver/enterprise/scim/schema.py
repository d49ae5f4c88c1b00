"""What the SCIM service publishes and accepts: the User resource with the attributes this
server keeps, and the capabilities it declares (scim2-models' ``ScimProvider``).

The User schema is RFC 7643's core User cut down to what is kept (``KEPT``): a person's
userName, name, displayName, e-mail addresses, externalId and whether they are active. What is
published is exactly what is stored and answered back, so an IdP (and ``scim2-tester``) never
writes an attribute that is silently dropped. An attribute outside it (a password, a phone
number, an attribute no schema defines) is refused with ``invalidSyntax`` (the SCIM
interoperability profile's §5.3), unless the operator sets ``CODEX_SCIM_IGNORE_UNKNOWN=1``, which
accepts and drops them (for an IdP whose mapping cannot be trimmed). No password is ever kept:
provisioned people sign in through single sign-on.

Groups are not served: nothing here is granted by group.
"""

from typing import Any

from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    ETag,
    External,
    Filter,
    Patch,
    Reference,
    Resource,
    ScimPolicy,
    ScimProvider,
    ServiceProviderConfig,
    Sort,
    User,
)

# The User attributes kept, and of the complex ones, the sub-attributes kept.
KEPT: dict[str, tuple[str, ...] | None] = {
    "userName": None,
    "name": ("formatted", "familyName", "givenName"),
    "displayName": None,
    "emails": ("value", "display", "type", "primary"),
    "active": None,
    "externalId": None,
}
# The complex attributes kept as the IdP sent them (ProvisionedPerson.attributes).
STORED_AS_SENT = ("name", "displayName", "emails")
# At most this many results on a page, whatever the request's count.
MAX_RESULTS = 100
# Bounds on a filter (authserver.enterprise.scim.filters): its text, and its comparisons and operators.
MAX_FILTER_CHARACTERS = 1024
MAX_FILTER_NODES = 32


def _kept_user_model() -> type[Resource[Any]]:
    schema = User.to_schema()
    attributes = []
    for attribute in schema.attributes or []:
        if attribute.name not in KEPT:
            continue
        subs = KEPT[attribute.name]
        if subs is not None:
            kept = [sub for sub in attribute.sub_attributes or [] if sub.name in subs]
            attribute = attribute.model_copy(update={"sub_attributes": kept})
        attributes.append(attribute)
    return Resource.from_schema(schema.model_copy(update={"attributes": attributes}))


PersonResource = _kept_user_model()

CONFIG = ServiceProviderConfig(
    documentation_uri=None,
    patch=Patch(supported=True),
    bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
    filter=Filter(supported=True, max_results=MAX_RESULTS),
    change_password=ChangePassword(supported=False),
    sort=Sort(supported=False),
    etag=ETag(supported=True),
    authentication_schemes=[
        AuthenticationScheme(
            type=AuthenticationScheme.Type.oauthbearertoken,
            name="Organization credential",
            description="The bearer credential the operator issued to the organization (manage.py scim_credential)",
            spec_uri=Reference[External]("https://www.rfc-editor.org/rfc/rfc6750"),
            primary=True,
        )
    ],
)


def provider(*, ignore_unknown: bool) -> ScimProvider:
    policy = ScimPolicy(unknown=ScimPolicy.Unknown.ignore if ignore_unknown else ScimPolicy.Unknown.forbid)
    return ScimProvider(models=[PersonResource], config=CONFIG, policy=policy)
