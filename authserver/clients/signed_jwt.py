"""One verification for every signed JWT a stranger presents: client assertions (RFC 7523 §2.2
and §3, ``authserver.clients.assertions``) and ID-JAGs (RFC 7523 §2.1 as the ID-JAG draft and the
MCP extension profile it, ``authserver.enterprise.id_jag``).

What differs between them on purpose is a ``Profile`` (the header's ``typ``, the claims required
beyond RFC 7523's, the replay store's namespace, and the words its refusals use) and the caller's
arguments (the issuers accepted, each with its key set; the audiences accepted). Everything else is
one rule here, so that the two cannot drift:

- at most ``MAX_JWT_CHARS`` characters; a JWS whose header names an asymmetric ``alg``
  (``SIGNING_ALGORITHMS``: never ``none``, never an HMAC, which keyed with a published public key
  proves nothing) and, when the issuer's key set was declared with one, that one;
- ``iss`` an accepted issuer (before any key is fetched), and the signature verifies with the key
  of its set that ``kid`` names (a set of one signing key may be used without a ``kid``:
  ``authserver.clients.key_sets``);
- ``iss``, ``sub``, ``aud``, ``exp`` and ``jti`` present (RFC 7523 §3), with the profile's own;
  ``aud`` one value (a string, or a list of exactly one) of those accepted, never a list that also
  names another server;
- ``exp`` a number in the future, at most ``MAX_LIFETIME_SECONDS`` after now and after ``iat``
  when there is one; ``iat`` and ``nbf``, when present, numbers not in the future; one
  ``LEEWAY_SECONDS`` of clock skew for all of them. (RFC 7523 §3 leaves ``iat`` optional; the
  ID-JAG draft requires it: its profile lists it);
- ``jti`` a string of 1 to ``MAX_JTI_CHARS`` characters, never used before: ``spend`` records it
  (``authserver.core.replay``) until no clock could take the JWT as unexpired. The caller spends
  last, once its own checks have passed (an ID-JAG's, in the transaction that issues its token),
  so that a refused JWT leaves nothing behind.

Why here, in ``clients``: the verification needs the key sets, which are fetched with this room's
hardened fetcher, and ``enterprise`` (the ID-JAG) may import ``clients`` while ``core`` may import
neither; the replay store it spends into stays in ``core``, below both.
"""

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jwt

from authserver.clients import key_sets
from authserver.clients.key_sets import KeySetSource
from authserver.core import replay

# Asymmetric only: an HMAC "signed" with the published public key proves nothing.
SIGNING_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
MAX_JWT_CHARS = 16_384
LEEWAY_SECONDS = 30
# Short-lived, so that the replay store holds only the JWTs alive now.
MAX_LIFETIME_SECONDS = 300
MAX_JTI_CHARS = 255
RFC7523_CLAIMS = ("iss", "sub", "aud", "exp", "jti")


class JwtRefused(Exception):
    """Why a JWT was refused, in words for its maker; ``missing`` names an absent required claim."""

    def __init__(self, description: str, *, missing: str = "") -> None:
        super().__init__(description)
        self.missing = missing


@dataclass(frozen=True)
class Profile:
    """What differs on purpose between two kinds of signed JWT."""

    noun: str  # how refusals name it: "the assertion", "the ID-JAG"
    namespace: str  # its jtis' namespace in the replay store
    unknown_issuer: str  # the refusal of an iss not accepted; "{issuer}" stands for it
    typ: str = ""  # the header's typ it must carry, if any
    required: tuple[str, ...] = ()  # claims it requires beyond RFC 7523's
    renew: str = ""  # said after a refusal that only a new JWT cures (expired, used before)


def _shown(value: object, limit: int) -> str:
    """A value a stranger sent, quoted and cut short, for a refusal's words."""
    return repr((value if isinstance(value, str) else json.dumps(value))[:limit])


def _audience_problem(audience: object, accepted: list[str], noun: str) -> str | None:
    if isinstance(audience, list):
        if len(audience) != 1:
            return f"{noun}'s aud must be one value (this server's issuer), not a list of several"
        audience = audience[0]
    if audience not in accepted:
        return f"{noun}'s aud must be " + " or ".join(accepted[:2])
    return None


def verify(
    token: object,
    *,
    profile: Profile,
    issuers: Mapping[str, KeySetSource],
    audiences: list[str],
    now: float,
    network: str | None = None,
) -> dict[str, Any]:
    """The claims of ``token`` once every rule above but the ``jti``'s first use holds, or
    ``JwtRefused`` saying which does not; the caller checks its own claims, then ``spend``s.
    ``issuers``: the ``iss`` values accepted, each with where its keys are; ``audiences``: the
    ``aud`` values accepted, the preferred first; ``network``: the client network of the request
    (its share of the fetch slots, should a key set be fetched). Nothing is written but what the
    key sets keep."""
    noun = profile.noun
    if not isinstance(token, str) or not token:
        raise JwtRefused(f"{noun} is not a signed JWT")
    if len(token) > MAX_JWT_CHARS:
        raise JwtRefused(f"{noun} is longer than {MAX_JWT_CHARS} characters")
    try:
        header = jwt.get_unverified_header(token)
        unverified = jwt.decode(token, options={"verify_signature": False})
    except (jwt.PyJWTError, ValueError, TypeError):
        raise JwtRefused(f"{noun} is not a signed JWT") from None
    if profile.typ and header.get("typ") != profile.typ:
        raise JwtRefused(f"{noun}'s header's typ must be \"{profile.typ}\"")
    algorithm, kid = header.get("alg"), header.get("kid")
    if algorithm not in SIGNING_ALGORITHMS:
        raise JwtRefused(
            f"alg {_shown(algorithm, 20)} is not accepted; {noun} is signed with one of {', '.join(SIGNING_ALGORITHMS)}"
        )
    if kid is not None and not isinstance(kid, str):
        raise JwtRefused("the header's kid must be a string")
    issuer = unverified.get("iss")
    source = issuers.get(issuer) if isinstance(issuer, str) else None
    if source is None:
        raise JwtRefused(profile.unknown_issuer.format(issuer=_shown(issuer, 100)))
    if source.algorithm and algorithm != source.algorithm:
        raise JwtRefused(f"alg must be {source.algorithm}, as declared with {source.owner}")
    try:
        key = key_sets.signing_key(source, kid, algorithm, network=network)
    except key_sets.KeySetRefused as refused:
        raise JwtRefused(str(refused)) from None
    try:
        claims = jwt.decode(
            token,
            key=key,
            algorithms=[algorithm],
            issuer=issuer,
            leeway=LEEWAY_SECONDS,
            # aud is checked below: PyJWT accepts a list that names any one of the values.
            options={"require": [*RFC7523_CLAIMS, *profile.required], "verify_aud": False},
        )
    except jwt.ExpiredSignatureError:
        raise JwtRefused(f"{noun} has expired{profile.renew}") from None
    except jwt.ImmatureSignatureError:
        raise JwtRefused(f"{noun}'s iat or nbf is in the future") from None
    except jwt.MissingRequiredClaimError as error:
        raise JwtRefused(f"{noun} has no {error.claim} claim", missing=error.claim) from None
    except jwt.InvalidSignatureError:
        raise JwtRefused(f"{noun}'s signature does not verify with {source.owner}") from None
    except (jwt.PyJWTError, ValueError, TypeError) as error:
        raise JwtRefused(f"{noun} is not valid ({type(error).__name__})") from None
    if problem := _audience_problem(claims["aud"], audiences, noun):
        raise JwtRefused(problem)
    expires, issued = claims["exp"], claims.get("iat")
    if not isinstance(expires, int | float) or (issued is not None and not isinstance(issued, int | float)):
        raise JwtRefused(f"{noun}'s exp and iat must be numbers")
    if expires > now + MAX_LIFETIME_SECONDS + LEEWAY_SECONDS or (
        issued is not None and expires - issued > MAX_LIFETIME_SECONDS
    ):
        raise JwtRefused(
            f"{noun} lives too long: this server accepts ones of at most {MAX_LIFETIME_SECONDS} seconds "
            "(exp at most that long after now, and after iat)"
        )
    jti = claims["jti"]
    if not isinstance(jti, str) or not 1 <= len(jti) <= MAX_JTI_CHARS:
        raise JwtRefused(f"{noun}'s jti must be a string of 1 to {MAX_JTI_CHARS} characters")
    return claims


def spend(claims: dict[str, Any], *, profile: Profile) -> None:
    """Record the ``jti`` of claims ``verify`` returned as used, or ``JwtRefused`` when it was
    before. Of two concurrent uses exactly one is first (``authserver.core.replay``). Kept until no
    clock could take the JWT as unexpired: its ``exp`` plus the leeway."""
    until = dt.datetime.fromtimestamp(claims["exp"] + LEEWAY_SECONDS + 1, tz=dt.UTC)
    if not replay.spend(namespace=profile.namespace, issuer=claims["iss"], jti=claims["jti"], expires_at=until):
        raise JwtRefused(f"{profile.noun}'s jti was used before{profile.renew}")
