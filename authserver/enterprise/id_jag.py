"""Enterprise-Managed Authorization: an Identity Assertion JWT Authorization Grant (ID-JAG,
draft-ietf-oauth-identity-assertion-authz-grant; MCP extension
``io.modelcontextprotocol/enterprise-managed-authorization``) presented at the token endpoint
with the RFC 7523 jwt-bearer grant gets an access token for the person it names, with no
consent page.

oauthlib (and so DOT 3.4.1) has no jwt-bearer grant: ``IdJagGrant`` is one, and ``CodexServer``
(DOT's ``OAUTH2_SERVER_CLASS``) serves it beside oauthlib's own grants.

Which IdPs are trusted is the single sign-on configuration (``authserver.core.sso_config``): a provider
with ``"id_jag": true``. Its key set is read from its discovery document's ``jwks_uri``, and
fetched, checked and kept as a client's is (``authserver.clients.key_sets``).

Only a confidential client may present one (``client_refusal``: it authenticates with a secret
or ``private_key_jwt``): the draft's security considerations say the grant SHOULD be served to
confidential clients only, since whoever holds an ID-JAG issued to a public client can redeem it.
A public client gets ``unauthorized_client`` saying so, unless the operator's policy lets public
clients in (``CODEX_ID_JAG_PUBLIC_CLIENTS``, ``authserver.core.policy``).

An ID-JAG is accepted only when all of these hold (each refusal is ``invalid_grant`` with a
description its client's author can act on; a client that does not authenticate as registered is
``invalid_client``). The one verification of a signed JWT (``authserver.clients.signed_jwt``) checks
what every signed JWT must be (an asymmetric ``alg``, the signature, ``aud`` one value, a short
life, a ``jti`` used once), with the ID-JAG's profile (``ID_JAG``):

- the header's ``typ`` is ``oauth-id-jag+jwt``, and ``iat``, ``client_id`` and ``resource`` are
  required beside RFC 7523's claims;
- ``iss`` is a trusted IdP's issuer, compared exactly as the IdP publishes it (a trailing slash
  included: the configuration keeps it as written, and the discovery document's ``issuer`` must
  be that very string), and the signature verifies with a key of its set;
- ``aud`` is this server's issuer; ``resource`` is this server's ``/mcp`` (the MCP extension makes
  it REQUIRED and the server MUST check it); ``client_id`` is the client that authenticated;
- ``sub`` names a person: the one linked to that provider with that subject, as single sign-on
  links them (allauth's ``SocialAccount``), never found by an unverified e-mail. An unknown
  subject is, as a first single sign-on would be, linked to the person the provider's organization
  provisioned through SCIM (``authserver.enterprise.scim.links``), by an ``email`` the ID-JAG says is
  verified (``email_verified`` exactly true), whatever ``signup`` says; else it gets an account
  only where the provider's ``signup`` is on, named by the ID-JAG's ``email`` of one of the
  provider's domains that no account has yet. A person who may not hold tokens (deactivated:
  ``authserver.core.tokens.person_may_hold_tokens``) is refused, here and again under their lock
  as the token is issued (``exchange.grant_hold``), should they be shut out in between;
- the scopes are those asked for (all of this server's that ``scope`` in the ID-JAG names, when
  none are) that the ID-JAG also grants; none left is a refusal;
- its ``jti`` was not used before (``authserver.core.replay``, spent last, in the transaction that
  issues the token, so a refused request stores nothing at all).

The token is bound to ``/mcp`` (the validator pins it), and there is no refresh token: the client
asks the IdP for a new ID-JAG, so the organization's decision is asked again. The person sees the
application under Connected applications, granted by their organization
(``authserver.models.OrganizationGrant``), and can revoke it there.
"""

import json
import logging
import time
from typing import Any

from allauth.account.adapter import get_adapter
from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone
from oauth2_provider.models import get_application_model
from oauthlib.oauth2 import Server
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.grant_types.base import GrantTypeBase

from authserver.clients import assertions, registration, signed_jwt
from authserver.clients.key_sets import KeySetSource
from authserver.core import policy
from authserver.core.scopes import ALL_SCOPES
from authserver.core.tokens import person_may_hold_tokens
from authserver.enterprise.addresses import accounts_named_by
from authserver.enterprise.scim import links
from authserver.enterprise.sso import domain_allowed
from authserver.models import OrganizationGrant
from common.ratelimit import oauthlib_client_network

logger = logging.getLogger(__name__)

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"
TYP = "oauth-id-jag+jwt"
# The ID-JAG draft's claims beyond RFC 7523's; the MCP extension makes resource REQUIRED.
ID_JAG = signed_jwt.Profile(
    noun="the ID-JAG",
    namespace="id-jag",
    typ=TYP,
    required=("iat", "client_id", "resource"),
    unknown_issuer=(
        "the ID-JAG's issuer {issuer} is not an identity provider this server trusts; its operator lists "
        "trusted ones in CODEX_OIDC_PROVIDERS"
    ),
    renew="; ask the IdP for a new one",
)
# The sub is kept as the person's sign-in link (allauth's SocialAccount.uid): a longer one could
# never be linked.
MAX_SUB_CHARS = SocialAccount._meta.get_field("uid").max_length


class Refused(Exception):
    """Why an ID-JAG was refused: logged, and said in ``error_description``."""


def trusted_providers() -> dict[str, dict[str, Any]]:
    """The single sign-on providers trusted for ID-JAG, by issuer exactly as configured."""
    return {provider["issuer"]: provider for provider in settings.CODEX_SSO_PROVIDERS if provider.get("id_jag")}


def client_refusal(client: Any) -> str | None:
    """Why ``client`` may not present an ID-JAG, or None. A confidential client (a secret) or one
    that authenticates with ``private_key_jwt`` (a metadata document's keys) may; a public client,
    which authenticates with its id alone, only where the operator's policy allows it. (Asked once
    the client has authenticated as it is registered: a client with a secret or keys cannot have
    got here without presenting them.)"""
    if (
        client.client_type == get_application_model().CLIENT_CONFIDENTIAL
        or assertions.keys_of(client.client_id) is not None
    ):
        return None
    if policy.id_jag_public_clients():
        return None
    return (
        "this server accepts an ID-JAG only from a confidential client, one that authenticates with a client "
        "secret or private_key_jwt; this client authenticates with its client_id alone (a public client), and "
        "anyone who obtained its ID-JAG could redeem it. Register it here as a confidential client, or its "
        "operator may allow public clients (CODEX_ID_JAG_PUBLIC_CLIENTS)"
    )


# --- the assertion -------------------------------------------------------------------------------


def _key_set(issuer: str) -> KeySetSource:
    return KeySetSource(owner="the IdP's key set", cache_name="idp-jwks", issuer=issuer)


def _one_string(value: object) -> object:
    if isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def verify(assertion: object, *, client_id: str, now: float, network: str | None = None) -> tuple[dict, dict]:
    """The ID-JAG's claims and the provider that signed it, or ``Refused`` saying why not.
    Nothing is written (the ``jti`` is spent by the grant, last: ``signed_jwt.spend``)."""
    if not isinstance(assertion, str) or not assertion:
        raise Refused("send the ID-JAG as the assertion parameter")
    providers = trusted_providers()
    try:
        claims = signed_jwt.verify(
            assertion,
            profile=ID_JAG,
            issuers={issuer: _key_set(issuer) for issuer in providers},
            audiences=[settings.CODEX_ISSUER_URL],
            now=now,
            network=network,
        )
    except signed_jwt.JwtRefused as refused:
        if refused.missing == "resource":
            raise Refused(
                f"the ID-JAG has no resource claim; it must be this server's {settings.CODEX_RESOURCE_URL}"
            ) from None
        raise Refused(str(refused)) from None
    if _one_string(claims["resource"]) != settings.CODEX_RESOURCE_URL:
        raise Refused(f"the ID-JAG's resource must be this server's resource, {settings.CODEX_RESOURCE_URL}")
    if claims["client_id"] != client_id:
        raise Refused("the ID-JAG was issued to another client: its client_id is not the client that authenticated")
    if not isinstance(claims["sub"], str) or not 1 <= len(claims["sub"]) <= MAX_SUB_CHARS:
        raise Refused(f"the ID-JAG's sub must be a string of 1 to {MAX_SUB_CHARS} characters")
    scope = claims.get("scope", "")
    if not isinstance(scope, str):
        raise Refused("the ID-JAG's scope must be a space-separated string")
    return claims, providers[claims["iss"]]


def find_person(provider: dict[str, Any], claims: dict[str, Any]) -> Any | None:
    """The person the ID-JAG names, linked to the provider as single sign-on links them; None
    when unknown and ``make_person`` will link them to the account their organization provisioned
    or make them one. ``Refused`` when neither may be done, or when the person is deactivated."""
    account = SocialAccount.objects.filter(provider=provider["id"], uid=claims["sub"]).select_related("user").first()
    if account is not None:
        if not person_may_hold_tokens(account.user):
            raise Refused("the person this ID-JAG names is deactivated on this server")
        return account.user
    if _provisioned(provider, claims) is not None:
        return None  # make_person links the subject to that account
    _new_email(provider, claims)
    return None


def _provisioned(provider: dict[str, Any], claims: dict[str, Any]) -> Any | None:
    """The person the provider's organization provisioned through SCIM with the ID-JAG's verified
    email (as a first single sign-on finds them, ``authserver.enterprise.scim.links``), or None. ``Refused``
    when that person is deactivated."""
    email = claims.get("email")
    if claims.get("email_verified") is not True or not isinstance(email, str):
        return None
    if not domain_allowed(email, provider["domains"]):
        return None
    person = links.provisioned_account(provider_id=provider["id"], emails=[email])
    if person is not None and not person_may_hold_tokens(person):
        raise Refused("the person this ID-JAG names is deactivated on this server")
    return person


def _new_email(provider: dict[str, Any], claims: dict[str, Any]) -> str:
    """The address a new account is made with; ``Refused`` when none may be made."""
    if not provider["signup"]:
        raise Refused(
            f"the person this ID-JAG names has no account here, and {provider['name']} accounts are not made on "
            "first use: they sign in once through single sign-on first, or their organization provisions them "
            "through SCIM with the address the ID-JAG gives as a verified email"
        )
    email = claims.get("email")
    if not isinstance(email, str) or not domain_allowed(email, provider["domains"]):
        raise Refused(
            "the person this ID-JAG names has no account here yet; an account is made on first use only from an "
            f"email claim of an allowed domain ({', '.join(provider['domains'])}): include it, or sign in once first"
        )
    if accounts_named_by([email]).exists():
        raise Refused(
            "an account with the ID-JAG's email already exists here and is not linked to this IdP subject; "
            "the person signs in once through single sign-on (or an operator links them) first"
        )
    return email


def make_person(provider: dict[str, Any], claims: dict[str, Any]) -> Any:
    """The unknown person (``find_person`` said they may be linked or made), linked to the
    provider's subject as a first single sign-on links it: the account their organization
    provisioned (read again here, in the grant's transaction), or a new one."""
    if (provisioned := _provisioned(provider, claims)) is not None:
        SocialAccount.objects.create(user=provisioned, provider=provider["id"], uid=claims["sub"], extra_data={})
        return provisioned
    email = _new_email(provider, claims)
    User = get_user_model()
    user = User(username=get_adapter().generate_unique_username([email.split("@")[0], "person"]), email=email)
    user.set_unusable_password()
    user.save()
    EmailAddress.objects.create(user=user, email=email, verified=True, primary=True)
    SocialAccount.objects.create(user=user, provider=provider["id"], uid=claims["sub"], extra_data={})
    return user


# --- the grant -----------------------------------------------------------------------------------


class IdJagGrant(GrantTypeBase):
    """RFC 7523 §2.1 jwt-bearer with an ID-JAG as the assertion (the module's docstring)."""

    def create_token_response(self, request, token_handler):
        headers = self._get_default_headers()
        try:
            self.validate_token_request(request)
            # One transaction: the jti, a new person, the token and the grant's record are all
            # kept, or (on any refusal) none of them.
            with transaction.atomic():
                try:
                    signed_jwt.spend(request.id_jag_claims, profile=ID_JAG)
                except signed_jwt.JwtRefused as refused:
                    raise Refused(str(refused)) from None
                issuer = request.id_jag_provider["issuer"]
                # The organization's grant approves a client as a person's consent does: a
                # registration still waiting for that is kept from now on (authserver.clients.registration).
                try:
                    registration.claim_on_approval(request.client)
                except registration.RegistrationExpired:
                    raise Refused("this client's registration expired before anyone used it; register again") from None
                if request.user is None:
                    try:
                        request.user = make_person(request.id_jag_provider, request.id_jag_claims)
                    except IntegrityError:  # the same person made by a concurrent first use
                        raise Refused("this person's account was being made at the same moment; try again") from None
                token = token_handler.create_token(request, refresh_token=False)
                token.pop("refresh_token", None)
                self.request_validator.save_token(token, request)
                OrganizationGrant.objects.update_or_create(
                    application=request.client,
                    user=request.user,
                    defaults={"issuer": issuer, "granted_at": timezone.now()},
                )
        except Refused as refused:
            return headers, self._refusal(request, str(refused)), 400
        except errors.OAuth2Error as error:
            headers.update(error.headers)
            return headers, error.json, error.status_code
        # DOT's token view sends app_authorized; its receiver writes the audit line
        # (authserver.signals: token.granted with grant="id_jag" and the issuer).
        return headers, json.dumps(token), 200

    @staticmethod
    def _refusal(request, description: str) -> str:
        logger.warning("ID-JAG refused for client %r: %s", str(request.client_id or "")[:255], description)
        return errors.InvalidGrantError(description=description, request=request).json

    def validate_token_request(self, request):
        if request.grant_type != GRANT_TYPE:
            raise errors.UnsupportedGrantTypeError(request=request)
        for param in ("grant_type", "assertion", "scope"):
            if param in request.duplicate_params:
                raise errors.InvalidRequestError(description=f"Duplicate {param} parameter.", request=request)
        # The client authenticates as it is registered (a secret, private_key_jwt, or none for
        # a public client), and may use this grant (authserver.oauth.validators).
        self.validate_client_authentication(request)
        self.validate_grant_type(request)
        # The request's own resource, if any, must be /mcp (invalid_target), before anything else.
        self.request_validator._check_and_set_request_resource(request)
        # The client's network (DOT hands the request's META as its headers): its share of the
        # fetch slots, should the IdP's key set be fetched.
        try:
            claims, provider = verify(
                # oauthlib's Request raises AttributeError for a parameter that was not sent.
                getattr(request, "assertion", None),
                client_id=request.client.client_id,
                now=time.time(),
                network=oauthlib_client_network(request),
            )
            granted = set(claims.get("scope", "").split())
            # Asked for nothing, the client asks for this server's scopes: an IdP may grant others
            # beside them (openid, another resource's), which are not this server's to give.
            asked = set((request.scope or "").split()) or set(ALL_SCOPES)
            scopes = sorted(asked & granted)
            if not scopes:
                raise Refused(
                    f"none of the scopes asked for ({' '.join(sorted(asked))}) is granted by the ID-JAG (it grants: "
                    f"{' '.join(sorted(granted)) or 'nothing'}); ask the IdP for an ID-JAG with them"
                )
            if not self.request_validator.validate_scopes(request.client_id, scopes, request.client, request):
                raise Refused(f"this server has no scope {' '.join(scopes)}; it offers notes:read and notes:write")
            request.user = find_person(provider, claims)
        except Refused as refused:
            logger.warning("ID-JAG refused for client %r: %s", str(request.client_id or "")[:255], refused)
            raise errors.InvalidGrantError(description=str(refused), request=request) from None
        request.scopes = scopes
        request.id_jag_claims = claims
        request.id_jag_provider = provider


class CodexServer(Server):
    """oauthlib's all-in-one server (DOT's default), with the jwt-bearer grant for ID-JAGs."""

    def __init__(self, request_validator, *args, **kwargs):
        super().__init__(request_validator, *args, **kwargs)
        self.grant_types[GRANT_TYPE] = IdJagGrant(request_validator)
