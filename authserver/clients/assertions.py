"""``private_key_jwt`` for clients named by a Client ID Metadata Document (RFC 7523 §2.2, RFC 7521).

Hosted clients such as ChatGPT name themselves with a metadata document that declares
``token_endpoint_auth_method: private_key_jwt`` and a ``jwks_uri`` (or an inline ``jwks``), and
prove who they are at the token endpoint with a JWT signed by a key of that set. DOT 3.4.1's
metadata-document support knows only public clients, so this module adds the rest, around
two documented seams of DOT: the metadata fetcher (``CIMD_METADATA_FETCHER``, where
``declared_keys`` reads the document) and the request validator (where ``authenticate``
checks the assertion; ``authserver.oauth.validators``).

An assertion is accepted only when all of these hold; anything else is ``invalid_client``:

- ``client_assertion_type`` is ``urn:ietf:params:oauth:client-assertion-type:jwt-bearer``;
- its ``alg`` is asymmetric (``SIGNING_ALGORITHMS``: never ``none``, never an HMAC) and, when the
  document names ``token_endpoint_auth_signing_alg``, that one;
- it is signed by a key of the client's set, chosen by ``kid`` (a set of one key may omit it);
- ``iss`` and ``sub`` are the client id; ``aud`` is one value (a string, or a list of exactly
  one): this server's issuer, or its token endpoint for older clients (or the revocation
  endpoint, where it is presented there); never a list that also names other servers;
- ``exp`` is in the future and at most ``MAX_LIFETIME_SECONDS`` ahead (with ``LEEWAY_SECONDS``
  of clock skew), so that the replay store below stays small;
- its ``jti`` was not seen before: it is spent (``authserver.core.replay``, a table no other write can
  evict from) until the assertion expires, and only once everything else has passed, so a
  refused assertion leaves nothing behind.

A key set behind ``jwks_uri`` is fetched by the same fetcher as the document
(``authserver.clients.fetching``: https, public addresses only, a size limit, one deadline over the
whole exchange, the shared fetch slots, the loopback exception in development only), kept in the
``default`` cache (which never evicts a live entry) for as long as its ``Cache-Control`` allows
(clamped as documents are) and at most ``KEY_SET_SECONDS``: a stranger's documents can each name
a key set of their own, and each kept set is a row that should not outlive the window the
document's fetch was counted in (``docs/architecture.md``, "Security state"). It is fetched again
once when an assertion names a ``kid`` the kept
set lacks (the client rotated its keys), at most once per ``REFETCH_FLOOR_SECONDS`` per set. A
fetch that fails is remembered for ``FAILED_FETCH_SECONDS``: meanwhile assertions that need the
set are refused without fetching it again.
"""

import datetime as dt
import hashlib
import json
import logging
import time
from dataclasses import dataclass
from typing import Any

import jwt
from django.conf import settings
from django.core.cache import cache
from oauth2_provider.cimd import CIMDError

from authserver.clients.fetching import FetchBusy, HardenedFetcher
from authserver.core import replay
from authserver.models import ClientKeys

logger = logging.getLogger(__name__)

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
PRIVATE_KEY_JWT = "private_key_jwt"
# Asymmetric only: an HMAC "signed" with the published public key proves nothing.
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
SHARED_SECRET_METHODS = frozenset({"client_secret_basic", "client_secret_post", "client_secret_jwt"})
MAX_LIFETIME_SECONDS = 300
LEEWAY_SECONDS = 30
REFETCH_FLOOR_SECONDS = 60
FAILED_FETCH_SECONDS = 60
KEY_SET_SECONDS = 600  # the metadata-document limit's window (authserver.oauth.views)
MAX_ASSERTION_CHARS = 16_384
MAX_JTI_CHARS = 256
MAX_KEYS = 32


class DocumentRefused(CIMDError):
    """A metadata document this server cannot use, with what its maker should change.

    A ``CIMDError``, so DOT treats the client as unknown (and backs off re-fetching it); the
    words are kept for the error page (``authserver.oauth.refusals``)."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.fix = fix


class AssertionRefused(Exception):
    """Why a client assertion was refused: logged, and said in ``error_description``."""


@dataclass(frozen=True)
class Declaration:
    """How a document says its client authenticates at the token endpoint."""

    method: str  # "none" or PRIVATE_KEY_JWT
    jwks_uri: str = ""
    jwks: dict[str, Any] | None = None
    signing_algorithm: str = ""


# --- the document ------------------------------------------------------------------------------


def key_set_problem(jwks: object) -> str | None:
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        return 'its "jwks" is not a JSON Web Key Set (an object with a "keys" array)'
    keys = jwks["keys"]
    if not keys:
        return 'its "jwks" holds no key'
    if len(keys) > MAX_KEYS:
        return f'its "jwks" holds {len(keys)} keys; at most {MAX_KEYS} are accepted'
    if not all(isinstance(key, dict) and isinstance(key.get("kty"), str) for key in keys):
        return 'a key of its "jwks" is not a JSON Web Key (an object with "kty")'
    if any("d" in key or key.get("kty") == "oct" for key in keys):
        return 'its "jwks" holds a private or symmetric key, which must never be published'
    return None


def declared_keys(metadata: dict[str, Any]) -> Declaration:
    """How the document's client authenticates, or ``DocumentRefused`` saying why it cannot.

    ``none`` (PKCE alone) and ``private_key_jwt`` with exactly one of ``jwks_uri`` and ``jwks``
    are accepted; shared secrets are refused, as the metadata-document draft requires."""
    method = metadata.get("token_endpoint_auth_method", "none")
    if not isinstance(method, str):
        raise DocumentRefused(
            "its token_endpoint_auth_method is not a text",
            'declare "none" (PKCE alone) or "private_key_jwt" with a "jwks_uri"',
        )
    if method == "none":
        return Declaration("none")
    if method in SHARED_SECRET_METHODS:
        raise DocumentRefused(
            f'it declares token_endpoint_auth_method "{method}", a shared secret, which a metadata document '
            "cannot carry",
            'declare "none" (PKCE alone) or "private_key_jwt" with a "jwks_uri"',
        )
    if method != PRIVATE_KEY_JWT:
        raise DocumentRefused(
            f"it declares token_endpoint_auth_method {method[:40]!r}, which this server does not offer",
            'declare "none" (PKCE alone) or "private_key_jwt" with a "jwks_uri"',
        )
    jwks_uri, jwks = metadata.get("jwks_uri"), metadata.get("jwks")
    if jwks_uri is None and jwks is None:
        raise DocumentRefused(
            'it declares "private_key_jwt" but names no keys: it has neither "jwks_uri" nor "jwks"',
            'add "jwks_uri", the https address of the key set its assertions are signed with',
        )
    if jwks_uri is not None and jwks is not None:
        raise DocumentRefused(
            'it has both "jwks_uri" and "jwks", which RFC 7591 forbids',
            'keep one of them ("jwks_uri" is preferred, so that keys can rotate)',
        )
    if jwks_uri is not None and (
        not isinstance(jwks_uri, str) or not jwks_uri.lower().startswith("https://") or len(jwks_uri) > 2048
    ):
        raise DocumentRefused(
            'its "jwks_uri" is not an https address',
            'serve the key set over https and name that address in "jwks_uri"',
        )
    if jwks is not None and (problem := key_set_problem(jwks)):
        raise DocumentRefused(problem, 'publish only public signing keys, in a "jwks_uri" or "jwks"')
    algorithm = metadata.get("token_endpoint_auth_signing_alg", "")
    if algorithm and algorithm not in SIGNING_ALGORITHMS:
        shown = algorithm if isinstance(algorithm, str) else json.dumps(algorithm)
        raise DocumentRefused(
            f"it declares token_endpoint_auth_signing_alg {shown[:20]!r}, which this server does not accept",
            f"sign assertions with one of {', '.join(SIGNING_ALGORITHMS)}, and name it",
        )
    return Declaration(PRIVATE_KEY_JWT, jwks_uri or "", jwks, algorithm)


def remember(client_id: str, declaration: Declaration) -> None:
    """Keep (or drop) the keys the document declares: the token endpoint asks for an
    assertion exactly from the clients that have a row."""
    if declaration.method != PRIVATE_KEY_JWT:
        ClientKeys.objects.filter(client_id=client_id).delete()
        return
    ClientKeys.objects.update_or_create(
        client_id=client_id,
        defaults={
            "jwks_uri": declaration.jwks_uri,
            "jwks": declaration.jwks,
            "signing_algorithm": declaration.signing_algorithm,
        },
    )
    if declaration.jwks_uri:
        # The document may name a new set: fetched afresh at its next assertion.
        cache.delete_many([_jwks_cache_key(declaration.jwks_uri), _failed_fetch_key(declaration.jwks_uri)])


def keys_of(client_id: str) -> ClientKeys | None:
    """The client's keys when it authenticates with ``private_key_jwt``, else None."""
    return ClientKeys.objects.filter(client_id=client_id).first()


# --- the key set -------------------------------------------------------------------------------


def cache_digest(text: str) -> str:
    """A cache key part for any text (a cache key has a length limit; the text, none)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _jwks_cache_key(jwks_uri: str) -> str:
    return "client-jwks:" + cache_digest(jwks_uri)


def _failed_fetch_key(jwks_uri: str) -> str:
    return "client-jwks-failed:" + cache_digest(jwks_uri)


def _fetch_key_set(jwks_uri: str, *, network: str | None) -> dict[str, Any]:
    if (failed := cache.get(_failed_fetch_key(jwks_uri))) is not None:
        raise AssertionRefused(
            f"the client's key set could not be fetched a moment ago ({failed}); it is not fetched again "
            f"for {FAILED_FETCH_SECONDS} seconds"
        )
    try:
        jwks, max_age = HardenedFetcher(network).fetch(jwks_uri)
        if problem := key_set_problem(jwks):
            raise CIMDError("it cannot be used: " + problem.replace('its "jwks"', "it"))
    except FetchBusy as error:  # nothing was fetched: nothing to hold against the set
        raise AssertionRefused(f"the client's key set could not be fetched just now ({error})") from None
    except CIMDError as error:
        cache.set(_failed_fetch_key(jwks_uri), str(error)[:200], timeout=FAILED_FETCH_SECONDS)
        raise AssertionRefused(f"the client's key set could not be fetched ({error})") from None
    cache.set(_jwks_cache_key(jwks_uri), jwks, timeout=min(max_age, KEY_SET_SECONDS))
    return jwks


def _key_set(keys: ClientKeys, *, network: str | None, fresh: bool = False) -> dict[str, Any]:
    if keys.jwks is not None:
        return keys.jwks
    if not fresh and (cached := cache.get(_jwks_cache_key(keys.jwks_uri))) is not None:
        return cached
    return _fetch_key_set(keys.jwks_uri, network=network)


def _select(jwks: dict[str, Any], kid: str | None, algorithm: str) -> dict[str, Any] | None:
    signing = [key for key in jwks["keys"] if key.get("use", "sig") == "sig" and key.get("alg", algorithm) == algorithm]
    if kid is not None:
        return next((key for key in signing if key.get("kid") == kid), None)
    return signing[0] if len(signing) == 1 else None


def _signing_key(keys: ClientKeys, kid: str | None, algorithm: str, *, network: str | None) -> jwt.PyJWK:
    key = _select(_key_set(keys, network=network), kid, algorithm)
    # An unknown kid: the client may have rotated its keys. Fetch again, at most once per
    # floor, so that assertions naming random kids cannot make us fetch at will.
    if (
        key is None
        and keys.jwks is None
        and kid is not None
        and cache.add("client-jwks-refetch:" + cache_digest(keys.jwks_uri), True, timeout=REFETCH_FLOOR_SECONDS)
    ):
        key = _select(_key_set(keys, network=network, fresh=True), kid, algorithm)
    if key is None:
        if kid is None:
            raise AssertionRefused("the assertion names no kid, and the client's key set has several signing keys")
        raise AssertionRefused(f"no key of the client's key set has kid {kid[:64]!r} for {algorithm}")
    try:
        return jwt.PyJWK(key, algorithm=algorithm)
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError) as error:
        raise AssertionRefused(f"the key with kid {kid!r} is not a {algorithm} public key ({error})") from None


# --- the assertion -----------------------------------------------------------------------------


def presented(request: Any) -> bool:
    """Whether an oauthlib request carries a client assertion (or its type)."""
    return bool(getattr(request, "client_assertion", None) or getattr(request, "client_assertion_type", None))


def claimed_client_id(assertion: object) -> str | None:
    """The ``iss`` of an assertion, unverified: which client it claims to be, to look it up."""
    if not isinstance(assertion, str) or len(assertion) > MAX_ASSERTION_CHARS:
        return None
    try:
        issuer = jwt.decode(assertion, options={"verify_signature": False}).get("iss")
    except (jwt.PyJWTError, ValueError, TypeError, AttributeError):
        return None
    return issuer if isinstance(issuer, str) else None


def audiences(endpoint: str) -> list[str]:
    """The values an assertion's one ``aud`` may be: this server's issuer (first: what current
    guidance asks for), its token endpoint, and the endpoint it is presented at."""
    issuer = settings.CODEX_ISSUER_URL
    return list(dict.fromkeys([issuer, issuer + "/token/", issuer + "/" + endpoint.strip("/") + "/"]))


def _audience_problem(audience: object, accepted: list[str]) -> str | None:
    if isinstance(audience, list):
        if len(audience) != 1:
            return "the assertion's aud must be one value (this server's issuer), not a list of several"
        audience = audience[0]
    if audience not in accepted:
        return "the assertion's aud must be " + " or ".join(accepted[:2])
    return None


def authenticate(
    *,
    client_id: str,
    keys: ClientKeys,
    assertion_type: object,
    assertion: object,
    endpoint: str,
    now: float,
    network: str | None = None,
) -> None:
    """Check a client assertion for ``client_id`` (whose keys are ``keys``); ``AssertionRefused``
    says why it is not good. On success its ``jti`` is spent. ``network``: the client network
    of the request (its share of the fetch slots, should the key set be fetched)."""
    if not isinstance(assertion, str) or not assertion:
        raise AssertionRefused(
            f"this client authenticates with private_key_jwt: send client_assertion (of type {ASSERTION_TYPE})"
        )
    if assertion_type != ASSERTION_TYPE:
        raise AssertionRefused(f"client_assertion_type must be {ASSERTION_TYPE}")
    if len(assertion) > MAX_ASSERTION_CHARS:
        raise AssertionRefused(f"client_assertion is longer than {MAX_ASSERTION_CHARS} characters")
    try:
        header = jwt.get_unverified_header(assertion)
    except (jwt.PyJWTError, ValueError, TypeError):
        raise AssertionRefused("client_assertion is not a signed JWT") from None
    algorithm, kid = header.get("alg"), header.get("kid")
    if algorithm not in SIGNING_ALGORITHMS:
        shown = algorithm if isinstance(algorithm, str) else json.dumps(algorithm)
        raise AssertionRefused(f"alg {shown[:20]!r} is not accepted; use one of {', '.join(SIGNING_ALGORITHMS)}")
    if keys.signing_algorithm and algorithm != keys.signing_algorithm:
        raise AssertionRefused(f"alg must be {keys.signing_algorithm}, as the client's metadata document declares")
    if kid is not None and not isinstance(kid, str):
        raise AssertionRefused("kid must be a string")
    key = _signing_key(keys, kid, algorithm, network=network)
    try:
        claims = jwt.decode(
            assertion,
            key=key,
            algorithms=[algorithm],
            issuer=client_id,
            leeway=LEEWAY_SECONDS,
            # aud is checked below: PyJWT accepts a list that names any one of the values.
            options={"require": ["iss", "sub", "aud", "exp", "jti"], "verify_iat": False, "verify_aud": False},
        )
    except jwt.ExpiredSignatureError:
        raise AssertionRefused("the assertion has expired") from None
    except jwt.InvalidIssuerError:
        raise AssertionRefused("the assertion's iss must be the client id") from None
    except jwt.MissingRequiredClaimError as error:
        raise AssertionRefused(f"the assertion has no {error.claim} claim") from None
    except jwt.InvalidSignatureError:
        raise AssertionRefused("the assertion's signature does not verify with the client's key") from None
    except (jwt.PyJWTError, ValueError, TypeError) as error:
        raise AssertionRefused(f"the assertion is not valid ({type(error).__name__})") from None
    if claims.get("sub") != client_id:
        raise AssertionRefused("the assertion's sub must be the client id")
    if problem := _audience_problem(claims["aud"], audiences(endpoint)):
        raise AssertionRefused(problem)
    expires = claims["exp"]
    if not isinstance(expires, int | float) or expires > now + MAX_LIFETIME_SECONDS + LEEWAY_SECONDS:
        raise AssertionRefused(f"the assertion's exp must be at most {MAX_LIFETIME_SECONDS} seconds ahead")
    issued = claims.get("iat")
    if issued is not None and (not isinstance(issued, int | float) or issued > now + LEEWAY_SECONDS):
        raise AssertionRefused("the assertion's iat is in the future")
    jti = claims["jti"]
    if not isinstance(jti, str) or not 1 <= len(jti) <= MAX_JTI_CHARS:
        raise AssertionRefused(f"the assertion's jti must be a string of 1 to {MAX_JTI_CHARS} characters")
    # Spent last, so that a refused assertion stores nothing; of two concurrent uses exactly one
    # is first (authserver.core.replay). Kept until no clock could take the assertion as unexpired.
    until = dt.datetime.fromtimestamp(expires + LEEWAY_SECONDS + 1, tz=dt.UTC)
    if not replay.spend(namespace=replay.CLIENT_ASSERTION, issuer=client_id, jti=jti, expires_at=until):
        raise AssertionRefused("the assertion's jti was used before")


def now() -> float:
    return time.time()
