"""Enterprise-Managed Authorization: an Identity Assertion JWT Authorization Grant (ID-JAG,
draft-ietf-oauth-identity-assertion-authz-grant; MCP extension
``io.modelcontextprotocol/enterprise-managed-authorization``) presented at the token endpoint
with the RFC 7523 jwt-bearer grant gets an access token for the person it names, with no
consent page.

oauthlib (and so DOT 3.4.1) has no jwt-bearer grant: ``IdJagGrant`` is one, and ``CodexServer``
(DOT's ``OAUTH2_SERVER_CLASS``) serves it beside oauthlib's own grants.

Which IdPs are trusted is the single sign-on configuration (``authserver.core.sso_config``): a provider
with ``"id_jag": true``. Its key set is read from its discovery document's ``jwks_uri``, both
fetched by ``authserver.clients.fetching.HardenedFetcher`` (https, one deadline over the whole exchange,
the shared fetch slots), kept in the ``default`` cache for as long as the answer's
``Cache-Control`` allows, and fetched again once when an ID-JAG names a ``kid`` the kept set lacks
(the IdP rotated its keys), at most once per ``REFETCH_FLOOR_SECONDS``.

An ID-JAG is accepted only when all of these hold (each refusal is ``invalid_grant`` with a
description its client's author can act on; a client that does not authenticate as registered is
``invalid_client``):

- the header's ``typ`` is ``oauth-id-jag+jwt`` and its ``alg`` asymmetric (never ``none``, never
  an HMAC: an HMAC keyed with the published public key proves nothing);
- ``iss`` is a trusted IdP's issuer, and the signature verifies with a key of its set;
- ``aud`` is this server's issuer (one value); ``resource``, when present, is this server's
  ``/mcp``; ``client_id`` is the client that authenticated;
- ``exp`` is in the future and at most ``MAX_LIFETIME_SECONDS`` after ``iat`` and after now
  (``LEEWAY_SECONDS`` of clock skew), ``iat`` not in the future;
- ``sub`` names a person: the one linked to that provider with that subject, as single sign-on
  links them (allauth's ``SocialAccount``), never found by an unverified e-mail. An unknown
  subject is, as a first single sign-on would be, linked to the person the provider's organization
  provisioned through SCIM (``authserver.enterprise.scim.links``), by an ``email`` the ID-JAG says is
  verified (``email_verified`` exactly true), whatever ``signup`` says; else it gets an account
  only where the provider's ``signup`` is on, named by the ID-JAG's ``email`` of one of the
  provider's domains that no account has yet. A deactivated person is refused;
- the scopes are those asked for (all of ``scope`` in the ID-JAG when none are) that the ID-JAG
  also grants; none left is a refusal;
- its ``jti`` was not used before (``authserver.core.replay``, spent last, in the transaction that
  issues the token, so a refused request stores nothing at all).

The token is bound to ``/mcp`` (the validator pins it), and there is no refresh token: the client
asks the IdP for a new ID-JAG, so the organization's decision is asked again. The person sees the
application under Connected applications, granted by their organization
(``authserver.models.OrganizationGrant``), and can revoke it there.
"""

import datetime as dt
import json
import logging
import time
from typing import Any

import jwt
from allauth.account.adapter import get_adapter
from allauth.account.models import EmailAddress
from allauth.socialaccount.models import SocialAccount
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone
from oauth2_provider.cimd import CIMDError
from oauthlib.oauth2 import Server
from oauthlib.oauth2.rfc6749 import errors
from oauthlib.oauth2.rfc6749.grant_types.base import GrantTypeBase

from authserver.clients import registration
from authserver.clients.assertions import SIGNING_ALGORITHMS, cache_digest
from authserver.clients.fetching import FetchBusy, HardenedFetcher
from authserver.core import replay
from authserver.enterprise.scim import links
from authserver.enterprise.sso import domain_allowed
from authserver.models import OrganizationGrant
from common.ratelimit import network_of

logger = logging.getLogger(__name__)

GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
PROFILE = "urn:ietf:params:oauth:grant-profile:id-jag"
TYP = "oauth-id-jag+jwt"
NAMESPACE = "id-jag"
MAX_LIFETIME_SECONDS = 300
LEEWAY_SECONDS = 30
REFETCH_FLOOR_SECONDS = 60
FAILED_FETCH_SECONDS = 30
MAX_ASSERTION_CHARS = 16_384
MAX_CLAIM_CHARS = 255


class Refused(Exception):
    """Why an ID-JAG was refused: logged, and said in ``error_description``."""


def trusted_providers() -> dict[str, dict[str, Any]]:
    """The single sign-on providers trusted for ID-JAG, by issuer."""
    return {provider["issuer"]: provider for provider in settings.CODEX_SSO_PROVIDERS if provider.get("id_jag")}


# --- the IdP's key set ---------------------------------------------------------------------------


def _keys_cache_key(issuer: str) -> str:
    return "idp-jwks:" + cache_digest(issuer)


def _fetch_keys(issuer: str, *, network: str | None) -> dict[str, Any]:
    failed_key = "idp-jwks-failed:" + cache_digest(issuer)
    if (failed := cache.get(failed_key)) is not None:
        raise Refused(f"the IdP's key set could not be fetched a moment ago ({failed}); try again shortly")
    fetcher = HardenedFetcher(network)
    try:
        discovery, _ = fetcher.fetch(issuer + "/.well-known/openid-configuration")
        jwks_uri = discovery.get("jwks_uri")
        if discovery.get("issuer", "").rstrip("/") != issuer or not isinstance(jwks_uri, str):
            raise CIMDError("its discovery document names another issuer, or no jwks_uri")
        jwks, max_age = fetcher.fetch(jwks_uri)
        if not isinstance(jwks.get("keys"), list):
            raise CIMDError("its jwks_uri serves no key set")
    except FetchBusy as error:  # nothing fetched: nothing to hold against the IdP
        raise Refused(f"the IdP's key set could not be fetched just now ({error})") from None
    except CIMDError as error:
        logger.warning("the key set of ID-JAG issuer %s could not be fetched: %s", issuer, error)
        cache.set(failed_key, str(error)[:200], timeout=FAILED_FETCH_SECONDS)
        raise Refused(f"the IdP's key set could not be fetched ({error})") from None
    cache.set(_keys_cache_key(issuer), jwks, timeout=max_age)
    return jwks


def _select(jwks: dict[str, Any], kid: str | None, algorithm: str) -> dict[str, Any] | None:
    signing = [
        key
        for key in jwks["keys"]
        if isinstance(key, dict) and key.get("use", "sig") == "sig" and key.get("alg", algorithm) == algorithm
    ]
    if kid is not None:
        return next((key for key in signing if key.get("kid") == kid), None)
    return signing[0] if len(signing) == 1 else None


def _signing_key(issuer: str, kid: str | None, algorithm: str, *, network: str | None) -> jwt.PyJWK:
    jwks = cache.get(_keys_cache_key(issuer))
    if jwks is None:
        jwks = _fetch_keys(issuer, network=network)
    key = _select(jwks, kid, algorithm)
    if (
        key is None
        and kid is not None
        and cache.add("idp-jwks-refetch:" + cache_digest(issuer), True, REFETCH_FLOOR_SECONDS)
    ):
        key = _select(_fetch_keys(issuer, network=network), kid, algorithm)
    if key is None:
        raise Refused(f"no key of the IdP's key set has kid {str(kid)[:64]!r} for {algorithm}")
    if key.get("d") is not None or key.get("kty") == "oct":
        raise Refused("the IdP's key set publishes a private or symmetric key; it cannot be trusted")
    try:
        return jwt.PyJWK(key, algorithm=algorithm)
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError) as error:
        raise Refused(f"the IdP's key {str(kid)[:64]!r} is not a {algorithm} public key ({error})") from None


# --- the assertion -------------------------------------------------------------------------------


def _one_string(value: object) -> object:
    if isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def verify(assertion: object, *, client_id: str, now: float, network: str | None = None) -> tuple[dict, dict]:
    """The ID-JAG's claims and the provider that signed it, or ``Refused`` saying why not.
    Nothing is written (the ``jti`` is spent by the caller, last)."""
    if not isinstance(assertion, str) or not assertion:
        raise Refused("send the ID-JAG as the assertion parameter")
    if len(assertion) > MAX_ASSERTION_CHARS:
        raise Refused(f"the assertion is longer than {MAX_ASSERTION_CHARS} characters")
    try:
        header = jwt.get_unverified_header(assertion)
        unverified = jwt.decode(assertion, options={"verify_signature": False})
    except (jwt.PyJWTError, ValueError, TypeError):
        raise Refused("the assertion is not a signed JWT") from None
    if header.get("typ") != TYP:
        raise Refused(f'the assertion is not an ID-JAG: its header\'s typ must be "{TYP}"')
    algorithm, kid = header.get("alg"), header.get("kid")
    if algorithm not in SIGNING_ALGORITHMS:
        shown = algorithm if isinstance(algorithm, str) else json.dumps(algorithm)
        raise Refused(
            f"alg {shown[:20]!r} is not accepted; an ID-JAG is signed with one of {', '.join(SIGNING_ALGORITHMS)}"
        )
    if kid is not None and not isinstance(kid, str):
        raise Refused("the header's kid must be a string")
    issuer = unverified.get("iss")
    provider = trusted_providers().get(issuer) if isinstance(issuer, str) else None
    if provider is None:
        raise Refused(
            f"the ID-JAG's issuer {str(issuer)[:100]!r} is not an identity provider this server trusts; "
            "its operator lists trusted ones in CODEX_OIDC_PROVIDERS"
        )
    key = _signing_key(issuer, kid, algorithm, network=network)
    try:
        claims = jwt.decode(
            assertion,
            key=key,
            algorithms=[algorithm],
            issuer=issuer,
            leeway=LEEWAY_SECONDS,
            options={"require": ["iss", "sub", "aud", "exp", "iat", "jti", "client_id"], "verify_aud": False},
        )
    except jwt.ExpiredSignatureError:
        raise Refused("the ID-JAG has expired; ask the IdP for a new one") from None
    except jwt.ImmatureSignatureError:
        raise Refused("the ID-JAG's iat is in the future") from None
    except jwt.MissingRequiredClaimError as error:
        raise Refused(f"the ID-JAG has no {error.claim} claim") from None
    except jwt.InvalidSignatureError:
        raise Refused("the ID-JAG's signature does not verify with its issuer's keys") from None
    except (jwt.PyJWTError, ValueError, TypeError) as error:
        raise Refused(f"the ID-JAG is not valid ({type(error).__name__})") from None
    if _one_string(claims["aud"]) != settings.CODEX_ISSUER_URL:
        raise Refused(f"the ID-JAG's aud must be this server's issuer, {settings.CODEX_ISSUER_URL}")
    resource = claims.get("resource")
    if resource is not None and _one_string(resource) != settings.CODEX_RESOURCE_URL:
        raise Refused(f"the ID-JAG's resource must be this server's resource, {settings.CODEX_RESOURCE_URL}")
    if claims["client_id"] != client_id:
        raise Refused("the ID-JAG was issued to another client: its client_id is not the client that authenticated")
    issued, expires = claims["iat"], claims["exp"]
    if not isinstance(issued, int | float) or not isinstance(expires, int | float):
        raise Refused("the ID-JAG's iat and exp must be numbers")
    if expires - issued > MAX_LIFETIME_SECONDS or expires > now + MAX_LIFETIME_SECONDS + LEEWAY_SECONDS:
        raise Refused(f"the ID-JAG lives too long: this server accepts ones of at most {MAX_LIFETIME_SECONDS} seconds")
    for name in ("sub", "jti"):
        if not isinstance(claims[name], str) or not 1 <= len(claims[name]) <= MAX_CLAIM_CHARS:
            raise Refused(f"the ID-JAG's {name} must be a string of 1 to {MAX_CLAIM_CHARS} characters")
    scope = claims.get("scope", "")
    if not isinstance(scope, str):
        raise Refused("the ID-JAG's scope must be a space-separated string")
    return claims, provider


def find_person(provider: dict[str, Any], claims: dict[str, Any]) -> Any | None:
    """The person the ID-JAG names, linked to the provider as single sign-on links them; None
    when unknown and ``make_person`` will link them to the account their organization provisioned
    or make them one. ``Refused`` when neither may be done, or when the person is deactivated."""
    account = SocialAccount.objects.filter(provider=provider["id"], uid=claims["sub"]).select_related("user").first()
    if account is not None:
        if not account.user.is_active:
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
    if person is not None and not person.is_active:
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
    User = get_user_model()
    if User.objects.filter(email__iexact=email).exists() or EmailAddress.objects.filter(email__iexact=email).exists():
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
                until = dt.datetime.fromtimestamp(request.id_jag_claims["exp"] + LEEWAY_SECONDS + 1, tz=dt.UTC)
                issuer = request.id_jag_provider["issuer"]
                if not replay.spend(
                    namespace=NAMESPACE, issuer=issuer, jti=request.id_jag_claims["jti"], expires_at=until
                ):
                    raise Refused("the ID-JAG was used before; ask the IdP for a new one")
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
        address = (getattr(request, "headers", None) or {}).get("REMOTE_ADDR")
        try:
            claims, provider = verify(
                # oauthlib's Request raises AttributeError for a parameter that was not sent.
                getattr(request, "assertion", None),
                client_id=request.client.client_id,
                now=time.time(),
                network=network_of(address) if address else None,
            )
            granted = set(claims.get("scope", "").split())
            asked = set((request.scope or "").split()) or granted
            scopes = sorted(asked & granted)
            if not scopes:
                raise Refused(
                    "none of the scopes asked for is granted by the ID-JAG (it grants: "
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
