"""``private_key_jwt`` for clients named by a Client ID Metadata Document (RFC 7523 §2.2, RFC 7521).

Hosted clients such as ChatGPT name themselves with a metadata document that declares
``token_endpoint_auth_method: private_key_jwt`` and a ``jwks_uri`` (or an inline ``jwks``), and
prove who they are at the token endpoint with a JWT signed by a key of that set. DOT 3.4.1's
metadata-document support knows only public clients, so this module adds the rest, around
two documented seams of DOT: the metadata fetcher (``CIMD_METADATA_FETCHER``, where
``declared_keys`` reads the document) and the request validator (where ``authenticate``
checks the assertion; ``authserver.oauth.validators``).

The assertion is checked by the one verification of a signed JWT
(``authserver.clients.signed_jwt``: an asymmetric ``alg``, and the document's
``token_endpoint_auth_signing_alg`` when it names one; a key of the client's set chosen by
``kid``; ``aud`` one value; a short life; a ``jti`` used once), with what RFC 7523 §3 asks of a
client assertion in particular: its ``iss`` and ``sub`` are the client id, and its ``aud`` this
server's issuer, or its token endpoint for older clients (or the revocation endpoint, where it is
presented there). Anything else is ``invalid_client``, and a refused assertion leaves nothing
behind. The client's key set (behind ``jwks_uri``, or inline) is fetched, checked and kept as
every key set is (``authserver.clients.key_sets``).
"""

import json
import time
from dataclasses import dataclass
from typing import Any

import jwt
from django.conf import settings
from oauth2_provider.cimd import CIMDError

from authserver.clients import key_sets, signed_jwt
from authserver.clients.key_sets import KeySetSource, key_set_problem
from authserver.clients.signed_jwt import MAX_JWT_CHARS, SIGNING_ALGORITHMS
from authserver.core import replay
from authserver.models import ClientKeys

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
PRIVATE_KEY_JWT = "private_key_jwt"
SHARED_SECRET_METHODS = frozenset({"client_secret_basic", "client_secret_post", "client_secret_jwt"})
# RFC 7523 §3: no typ, no claim beyond the RFC's (iat may be left out).
CLIENT_ASSERTION = signed_jwt.Profile(
    noun="the assertion",
    namespace=replay.CLIENT_ASSERTION,
    unknown_issuer="the assertion's iss must be the client id",
)


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
        key_sets.forget(_client_key_set(declaration.jwks_uri, None, declaration.signing_algorithm))


def keys_of(client_id: str) -> ClientKeys | None:
    """The client's keys when it authenticates with ``private_key_jwt``, else None."""
    return ClientKeys.objects.filter(client_id=client_id).first()


# --- the key set -------------------------------------------------------------------------------


def _client_key_set(jwks_uri: str, jwks: dict[str, Any] | None, algorithm: str) -> KeySetSource:
    return KeySetSource(
        owner="the client's key set",
        cache_name="client-jwks",
        jwks_uri=jwks_uri if jwks is None else "",
        inline=jwks,
        algorithm=algorithm,
    )


# --- the assertion -----------------------------------------------------------------------------


def presented(request: Any) -> bool:
    """Whether an oauthlib request carries a client assertion (or its type)."""
    return bool(getattr(request, "client_assertion", None) or getattr(request, "client_assertion_type", None))


def claimed_client_id(assertion: object) -> str | None:
    """The ``iss`` of an assertion, unverified: which client it claims to be, to look it up."""
    if not isinstance(assertion, str) or len(assertion) > MAX_JWT_CHARS:
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
    try:
        claims = signed_jwt.verify(
            assertion,
            profile=CLIENT_ASSERTION,
            issuers={client_id: _client_key_set(keys.jwks_uri, keys.jwks, keys.signing_algorithm)},
            audiences=audiences(endpoint),
            now=now,
            network=network,
        )
        if claims["sub"] != client_id:
            raise AssertionRefused("the assertion's sub must be the client id")
        signed_jwt.spend(claims, profile=CLIENT_ASSERTION)  # last: a refused assertion stores nothing
    except signed_jwt.JwtRefused as refused:
        raise AssertionRefused(str(refused)) from None


def now() -> float:
    return time.time()
