"""The key sets that sign the JWTs strangers present: a client's (its ``jwks_uri``, or the
``jwks`` its registration holds) for its assertions, and a trusted IdP's (the ``jwks_uri`` of its
discovery document) for its ID-JAGs. One set of rules fetches, checks and keeps them all.

- **Fetched** by ``authserver.clients.fetching.HardenedFetcher`` (https, public addresses only, a
  size limit, one deadline over the whole exchange, the shared fetch slots and the caller's
  network's share of them, the loopback exception in development only). An IdP's discovery
  document is fetched the same way, and must name the issuer exactly as configured (OpenID
  Connect Discovery §4.3): a document that names another issuer lends none of its keys.
- **Checked** whole by ``key_set_problem``: a JSON Web Key Set of at most ``MAX_KEYS`` keys, each
  with a ``kty``, none private or symmetric. A set that publishes a secret is not trusted for any
  of its keys: whoever published one cannot be trusted to keep the others.
- **Kept** in the ``default`` cache (which never evicts a live entry) as long as the answer's
  ``Cache-Control`` allows (clamped as metadata documents are) and at most ``KEY_SET_SECONDS``: a
  stranger's documents can each name a key set of their own, and each kept set is a row that
  should not outlive the window the document's fetch was counted in (``docs/architecture.md``,
  "Security state"); an IdP that withdraws a key is believed within as long.
- **Fetched again** once when a JWT names a ``kid`` the kept set lacks (its owner rotated its
  keys), at most once per ``REFETCH_FLOOR_SECONDS`` per set, so that JWTs naming made-up kids
  cannot make this server fetch at will.
- **A failed fetch is remembered** for ``FAILED_FETCH_SECONDS``: meanwhile every JWT that needs the
  set is refused without fetching it again. A fetch that found no free slot was not made, and is
  not held against the set.

Each set is cached under its ``KeySetSource.cache_name`` and its address (or issuer): a set many
clients share is one row for all of them.
"""

import hashlib
import logging
from dataclasses import dataclass
from typing import Any

import jwt
from django.core.cache import cache
from oauth2_provider.cimd import CIMDError

from authserver.clients.fetching import FetchBusy, HardenedFetcher
from authserver.core.sso_config import discovery_url

logger = logging.getLogger(__name__)

MAX_KEYS = 32
KEY_SET_SECONDS = 600  # the metadata-document limit's window (authserver.oauth.views)
REFETCH_FLOOR_SECONDS = 60
FAILED_FETCH_SECONDS = 60


class KeySetRefused(Exception):
    """Why no key of a set can verify a JWT: the set could not be had, or has no such key."""


@dataclass(frozen=True)
class KeySetSource:
    """Where one signer's key set is: exactly one of ``jwks_uri``, ``issuer`` and ``inline``."""

    owner: str  # how refusals name the set: "the client's key set"
    cache_name: str  # the prefix of its rows in the default cache: "client-jwks"
    jwks_uri: str = ""  # fetched from this address;
    issuer: str = ""  # or from the jwks_uri of this issuer's discovery document;
    inline: dict[str, Any] | None = None  # or held whole by a registration: never fetched
    algorithm: str = ""  # the one alg its owner declared it signs with, if any

    @property
    def identity(self) -> str:
        return self.jwks_uri or self.issuer


def cache_digest(text: str) -> str:
    """A cache key part for any text (a cache key has a length limit; the text, none)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cache_key(source: KeySetSource, row: str = "") -> str:
    return f"{source.cache_name}{row}:{cache_digest(source.identity)}"


def key_set_problem(jwks: object) -> str | None:
    """What makes ``jwks`` unusable as a key set of public signing keys, or None."""
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


def forget(source: KeySetSource) -> None:
    """Drop what is kept of the set (a document names a new one): fetched afresh when next needed."""
    if source.inline is None:
        cache.delete_many([_cache_key(source), _cache_key(source, "-failed")])


def _jwks_uri(source: KeySetSource, fetcher: HardenedFetcher) -> str:
    if source.jwks_uri:
        return source.jwks_uri
    discovery, _ = fetcher.fetch(discovery_url(source.issuer))
    jwks_uri = discovery.get("jwks_uri")
    if discovery.get("issuer") != source.issuer or not isinstance(jwks_uri, str):
        raise CIMDError(
            f"its discovery document names another issuer ({str(discovery.get('issuer'))[:100]!r}, not "
            f"{source.issuer!r} as configured), or no jwks_uri"
        )
    return jwks_uri


def _fetch(source: KeySetSource, *, network: str | None) -> dict[str, Any]:
    failed_key = _cache_key(source, "-failed")
    if (failed := cache.get(failed_key)) is not None:
        raise KeySetRefused(
            f"{source.owner} could not be fetched a moment ago ({failed}); it is not fetched again for "
            f"{FAILED_FETCH_SECONDS} seconds"
        )
    fetcher = HardenedFetcher(network)
    try:
        jwks, max_age = fetcher.fetch(_jwks_uri(source, fetcher))
        if problem := key_set_problem(jwks):
            raise CIMDError("it cannot be used: " + problem.replace('its "jwks"', "it"))
    except FetchBusy as error:  # nothing was fetched: nothing to hold against the set
        raise KeySetRefused(f"{source.owner} could not be fetched just now ({error})") from None
    except CIMDError as error:
        logger.warning("%s at %s could not be fetched: %s", source.owner, source.identity[:255], error)
        cache.set(failed_key, str(error)[:200], timeout=FAILED_FETCH_SECONDS)
        raise KeySetRefused(f"{source.owner} could not be fetched ({error})") from None
    cache.set(_cache_key(source), jwks, timeout=min(max_age, KEY_SET_SECONDS))
    return jwks


def _keys(source: KeySetSource, *, network: str | None, fresh: bool = False) -> dict[str, Any]:
    if source.inline is not None:
        return source.inline
    if not fresh and (kept := cache.get(_cache_key(source))) is not None:
        return kept
    return _fetch(source, network=network)


def _select(jwks: dict[str, Any], kid: str | None, algorithm: str) -> dict[str, Any] | None:
    """The signing key for ``algorithm`` named ``kid``; with no ``kid``, the set's only one."""
    signing = [key for key in jwks["keys"] if key.get("use", "sig") == "sig" and key.get("alg", algorithm) == algorithm]
    if kid is not None:
        return next((key for key in signing if key.get("kid") == kid), None)
    return signing[0] if len(signing) == 1 else None


def signing_key(source: KeySetSource, kid: str | None, algorithm: str, *, network: str | None) -> jwt.PyJWK:
    """The key of ``source``'s set that verifies a JWT signed with ``algorithm`` under ``kid``, or
    ``KeySetRefused`` saying why none does. ``network``: the client network of the request (its
    share of the fetch slots, should the set be fetched)."""
    key = _select(_keys(source, network=network), kid, algorithm)
    if (
        key is None
        and source.inline is None
        and kid is not None
        and cache.add(_cache_key(source, "-refetch"), True, timeout=REFETCH_FLOOR_SECONDS)
    ):
        key = _select(_keys(source, network=network, fresh=True), kid, algorithm)
    if key is None:
        if kid is None:
            raise KeySetRefused(f"the header names no kid, and {source.owner} has several signing keys")
        raise KeySetRefused(f"no key of {source.owner} has kid {kid[:64]!r} for {algorithm}")
    try:
        return jwt.PyJWK(key, algorithm=algorithm)
    except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError, KeyError) as error:
        raise KeySetRefused(
            f"the key of {source.owner} with kid {str(kid)[:64]!r} is not a {algorithm} public key ({error})"
        ) from None
