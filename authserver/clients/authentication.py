"""Which client a request to the token, revocation or introspection endpoint comes from: one
function, ``client_authenticate``, decided from what it verified.

Every endpoint that authenticates a client reaches it through django-oauth-toolkit's validator
(``authserver.oauth.validators.CodexOAuth2Validator.authenticate_client``, which oauthlib calls at
the token and revocation endpoints and DOT's introspection view calls too). It reads the
credentials the request carries (``Presented``) and:

- refuses credentials in more than one place (RFC 6749 §2.3: one method per request): the
  Authorization header's Basic credentials, a ``client_secret`` in the body and a client
  assertion are each a method, and two of them are ``invalid_request``; a body ``client_id``
  beside Basic credentials must name the same client;
- names the client by the method it used (the Basic credentials' id, the body's ``client_id``,
  or the assertion's), and verifies exactly that method: the client's secret
  (``client_secret_basic``, ``client_secret_post``), its assertion (``private_key_jwt``,
  ``authserver.clients.assertions``: the only method of a client with keys), or nothing for a
  public client (``none``, PKCE; never for ``client_credentials``, which RFC 6749 §4.4 keeps for
  clients that authenticate); a confidential client that sends nothing is refused. There is
  no second try with the other credentials: what was verified is who the client is;
- at introspection, admits only the resource servers the operator lists
  (``CODEX_INTROSPECTION_CLIENTS``: confidential, with their secret), before anything is checked;
- counts failed checks (``authserver.core.attempts``, one-minute windows) per client network
  (``common.ratelimit.network_of``: an IPv4 address, an IPv6 /64) and per client, and reserves
  the attempt before the secret is hashed or the assertion verified, giving it back on success:
  past a limit the attempt is refused before any hash (429 ``invalid_client`` with
  ``Retry-After``), and however many attempts arrive at once no more than the limit are hashed.

The per-client limit must not let a stranger lock a client out by failing against its id: once a
client is at its limit, an attempt is still checked from a network that has not failed against
that client in the window (the resource server's own network, when the failures are a
stranger's), and refused only from the networks that failed. So a stranger keeps out only
themselves, guessing across networks gets one more guess per network a minute, and a network that
did fail waits at most until the minute ends.
"""

import base64
import binascii
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import unquote_plus

from django.conf import settings
from oauth2_provider.models import AbstractApplication
from oauthlib.oauth2.rfc6749 import errors

import codex_metrics
from authserver.clients import assertions
from authserver.core import attempts

logger = logging.getLogger(__name__)

NONE = "none"
SECRET_BASIC = "client_secret_basic"
SECRET_POST = "client_secret_post"
PRIVATE_KEY_JWT = assertions.PRIVATE_KEY_JWT
# How a resource server authenticates at introspection: its client secret, and nothing else.
INTROSPECTION_AUTH_METHODS = (SECRET_BASIC, SECRET_POST)
# The endpoints, named by their path under the issuer (as an assertion's aud names them too).
TOKEN = "token/"
REVOCATION = "revoke_token/"
INTROSPECTION = "introspect/"
WINDOW_SECONDS = 60
CLIENT_CREDENTIALS = "client_credentials"


class MalformedAuthorization(ValueError):
    """An Authorization header this server cannot read: ``invalid_request``, saying why."""


class Throttled(errors.InvalidClientError):
    """Too many failed authentications for the client or from the network: nothing was checked."""

    status_code = 429

    def __init__(self, *, retry_after: int, description: str) -> None:
        super().__init__(description=description)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


def basic_credentials(authorization: str | None) -> tuple[str, str] | None:
    """The client id and secret of an ``Authorization: Basic`` header (each form-decoded, RFC 6749
    §2.3.1); None without a header or for another scheme. ``MalformedAuthorization`` when the header
    is not ASCII, or its Basic credentials are not base64 of UTF-8 holding a colon."""
    if not authorization:
        return None
    if not authorization.isascii():
        raise MalformedAuthorization("The Authorization header must be ASCII")
    scheme, _, credentials = authorization.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise MalformedAuthorization(
            "The Authorization header's Basic credentials must be base64 of client_id:client_secret in UTF-8"
        ) from None
    client_id, colon, secret = decoded.partition(":")
    if not colon:
        raise MalformedAuthorization("The Authorization header's Basic credentials must be client_id:client_secret")
    return unquote_plus(client_id), unquote_plus(secret)


@dataclass(frozen=True)
class Presented:
    """The client credentials a request carries, as it sent them."""

    basic: tuple[str, str] | None
    client_id: str | None
    client_secret: str | None
    assertion_type: str | None
    assertion: str | None

    @classmethod
    def of(cls, *, authorization: str | None, param: Callable[[str], Any]) -> "Presented":
        """From the Authorization header and the body's parameters (``param(name)``: its value or None)."""

        def text(name: str) -> str | None:
            value = param(name)
            return value if isinstance(value, str) and value else None

        return cls(
            basic=basic_credentials(authorization),
            client_id=text("client_id"),
            client_secret=text("client_secret"),
            assertion_type=text("client_assertion_type"),
            assertion=text("client_assertion"),
        )

    def method(self) -> str:
        """The one method the request authenticates with; ``invalid_request`` for two or more."""
        used = []
        if self.basic is not None:
            used.append(SECRET_BASIC)
        if self.client_secret is not None:
            used.append(SECRET_POST)
        if self.assertion is not None or self.assertion_type is not None:
            used.append(PRIVATE_KEY_JWT)
        if len(used) > 1:
            raise errors.InvalidRequestError(
                description=f"The client authenticated in more than one way ({' and '.join(used)}); "
                "use exactly one (RFC 6749 §2.3)"
            )
        return used[0] if used else NONE

    def client_id_for(self, method: str) -> str | None:
        """The client the request names for ``method``."""
        if method == SECRET_BASIC:
            assert self.basic is not None
            if self.client_id is not None and self.client_id != self.basic[0]:
                raise errors.InvalidRequestError(
                    description="The client_id in the body names another client than the Authorization header"
                )
            return self.basic[0]
        if method == PRIVATE_KEY_JWT:
            return self.client_id or assertions.claimed_client_id(self.assertion)
        return self.client_id


@dataclass(frozen=True)
class Authenticated:
    application: Any  # DOT's Application
    method: str


def client_authenticate(
    *,
    presented: Presented,
    endpoint: str,
    network: str,
    load: Callable[[str], Any],
    check_secret: Callable[[str, str], bool],
    grant_type: str | None = None,
) -> Authenticated:
    """The client the request authenticated as, by the one method it used, or an oauthlib error
    (``invalid_request``, ``invalid_client``; ``Throttled``, a 429) saying why not (the module's
    docstring), logged once as a WARNING with the client id the request named. ``endpoint``: the
    path under the issuer (``TOKEN``, ``REVOCATION``, ``INTROSPECTION``); ``network``: the
    request's client network; ``load``: the client by id (DOT's lookup, None when unknown);
    ``check_secret``: DOT's comparison of a secret with the stored one; ``grant_type``: the token
    request's grant (``client_credentials`` needs a method other than none)."""
    try:
        return _authenticate(
            presented=presented,
            endpoint=endpoint,
            network=network,
            load=load,
            check_secret=check_secret,
            grant_type=grant_type,
        )
    except errors.OAuth2Error as refused:
        named = presented.basic[0] if presented.basic else presented.client_id
        if named is None and presented.assertion is not None:
            named = assertions.claimed_client_id(presented.assertion)
        logger.warning(
            "client authentication refused at %s for %r from %s: %s",
            endpoint[:40],
            (named or "")[:255],
            network,
            refused.description,
        )
        raise


def _authenticate(
    *,
    presented: Presented,
    endpoint: str,
    network: str,
    load: Callable[[str], Any],
    check_secret: Callable[[str, str], bool],
    grant_type: str | None = None,
) -> Authenticated:
    method = presented.method()
    client_id = presented.client_id_for(method)
    if endpoint == INTROSPECTION and (
        method not in INTROSPECTION_AUTH_METHODS or client_id not in settings.CODEX_INTROSPECTION_CLIENTS
    ):
        raise errors.InvalidClientError(
            description="Only the resource servers this server's operator provisions may introspect tokens, "
            "with their client secret"
        )
    if not client_id:
        raise errors.InvalidClientError(description="Name the client: send client_id, or authenticate as it")
    application = load(client_id)
    if application is None:
        raise errors.InvalidClientError(description="This server has no client with this client_id")
    confidential = application.client_type == AbstractApplication.CLIENT_CONFIDENTIAL
    if endpoint == INTROSPECTION and not confidential:
        raise errors.InvalidClientError(description="Only a confidential client may introspect tokens")
    # Read once the client is loaded (a metadata document fetched again declares its keys anew).
    keys = assertions.keys_of(application.client_id)
    if method == NONE:
        if keys is not None:
            raise errors.InvalidClientError(
                description="This client authenticates with private_key_jwt: send client_assertion "
                f"(of type {assertions.ASSERTION_TYPE})"
            )
        if confidential:
            raise errors.InvalidClientError(
                description="This client is confidential: authenticate with its secret (HTTP Basic or client_secret)"
            )
        if grant_type == CLIENT_CREDENTIALS:
            raise errors.InvalidClientError(
                description="The client_credentials grant is for a client that authenticates (RFC 6749 §4.4)"
            )
        return Authenticated(application, NONE)
    if method == PRIVATE_KEY_JWT and keys is None:
        raise errors.InvalidClientError(
            description="This client does not authenticate with private_key_jwt (its metadata document declares no "
            "keys, or it is a headless agent made with a secret, or revoked)"
        )
    if method != PRIVATE_KEY_JWT and keys is not None:
        raise errors.InvalidClientError(
            description="This client authenticates with private_key_jwt: send client_assertion, not a secret"
        )

    def verify() -> str | None:
        """Why the credentials are wrong, or None when they are right."""
        if method == PRIVATE_KEY_JWT:
            try:
                assertions.authenticate(
                    client_id=application.client_id,
                    keys=keys,
                    assertion_type=presented.assertion_type,
                    assertion=presented.assertion,
                    endpoint=endpoint,
                    now=assertions.now(),
                    network=network,
                )
            except assertions.AssertionRefused as refused:
                return str(refused)
            return None
        secret = presented.basic[1] if method == SECRET_BASIC and presented.basic else presented.client_secret
        if check_secret(secret or "", application.client_secret):
            return None
        return "The client secret is wrong"

    if (problem := _counted(application, network, verify)) is not None:
        raise errors.InvalidClientError(description=problem)
    return Authenticated(application, method)


def _counted(application: Any, network: str, verify: Callable[[], str | None]) -> str | None:
    """``verify()``, once its attempt is reserved under the network's and the client's limits
    (``Throttled`` when it cannot be), given back when it succeeds."""
    window = attempts.Window.of(WINDOW_SECONDS)
    per_network = attempts.Counter(f"client-auth:network:{network}", settings.CODEX_CLIENT_AUTH_FAILURES_PER_NETWORK)
    per_client = attempts.Counter(
        f"client-auth:client:{application.pk}", settings.CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT
    )
    # This network's failures against this client: whether the client's limit applies to it.
    pair = f"client-auth:client:{application.pk}:network:{network}"
    try:
        reservation = attempts.attempt_reserve(counters=[per_network, per_client], window=window)
    except attempts.Exhausted as full:
        if full.counter is per_network or attempts.attempt_count(name=pair, window=window):
            _throttled(full)
        # The client is at its limit, by failures from other networks: this one still gets checked.
        try:
            reservation = attempts.attempt_reserve(counters=[per_network], window=window)
        except attempts.Exhausted as network_full:
            _throttled(network_full)
    problem = verify()
    if problem is None:
        attempts.attempt_return(reservation)
    else:
        attempts.attempt_record(name=pair, window=window)
    return problem


def _throttled(full: attempts.Exhausted) -> NoReturn:
    wait = full.window.seconds_left()
    whom = "from this network" if full.counter.name.startswith("client-auth:network:") else "for this client"
    codex_metrics.limit_refused("client_authentication_failures")
    raise Throttled(
        retry_after=wait,
        description=f"Too many failed client authentications {whom}; nothing was checked. Retry in {wait} s",
    )
