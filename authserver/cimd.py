"""Client ID Metadata Documents: what this server accepts in one, and why it refused one.

DOT fetches a document (through ``CodexMetadataFetcher``, its documented
``CIMD_METADATA_FETCHER`` seam) and builds a public Application from it. The fetcher checks the
document first, with reasons a person can pass on: a refused document raises
``DocumentRefused``, whose words the error page shows (``authserver.refusals``). A document
declaring ``private_key_jwt`` is accepted here: its keys are kept
(``authserver.client_assertions``), and DOT is handed the document as a public client's, since
its own builder knows no other kind; the token endpoint then asks that client for an assertion
(``authserver.validators``), so it is never served as a public client.
"""

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import caches
from oauth2_provider.cimd import CIMDError, is_cimd_client_id
from oauth2_provider.settings import oauth2_settings

from authserver import client_assertions
from authserver.client_assertions import DocumentRefused
from authserver.fetching import HardenedFetcher, is_loopback

# The members that say how the client authenticates, which DOT's builder must not see.
_AUTHENTICATION_MEMBERS = ("token_endpoint_auth_method", "jwks_uri", "jwks", "token_endpoint_auth_signing_alg")
_DOCUMENT_FIX = (
    "serve the document at exactly this https address, publicly reachable, as JSON "
    f"(Content-Type application/json) of at most {oauth2_settings.CIMD_MAX_DOCUMENT_SIZE // 1024} KiB"
)


def refusal_hint(client_id: str) -> str | None:
    """Why a metadata document on a loopback address was refused, for the error page.

    DOT's fetcher refuses such addresses without saying so; a developer running a client
    locally against a server with debug off needs to know which setting decides.
    """
    if settings.CODEX_CIMD_ALLOW_LOOPBACK or not is_cimd_client_id(client_id):
        return None
    if not is_loopback(urlsplit(client_id).hostname):
        return None
    return (
        "This application's client ID is a metadata document on a loopback address "
        f"({urlsplit(client_id).netloc}). This server fetches metadata documents only from public "
        "addresses, except in development (DJANGO_DEBUG=1, or CODEX_CIMD_ALLOW_LOOPBACK=1, which must "
        "never be on in production). Serve the document from a public HTTPS address, or register "
        "the application with Dynamic Client Registration instead."
    )


def _notes():
    """The cache of notes a stranger's requests can make (never the security state's)."""
    return caches["notes"]


def _refusal_key(client_id: str) -> str:
    return "cimd-refusal:" + client_assertions.cache_digest(client_id)


def remembered_refusal(client_id: str) -> dict[str, str] | None:
    """What was wrong with the document the last time it was fetched, while DOT backs off."""
    return _notes().get(_refusal_key(client_id))


def _check_document(client_id: str, metadata: dict[str, Any]) -> client_assertions.Declaration:
    """The parts of a document DOT would refuse without a reason, checked with one."""
    if metadata.get("client_id") != client_id:
        raise DocumentRefused(
            'its "client_id" is not the address it was fetched from',
            f'set "client_id" to exactly {client_id}',
        )
    declaration = client_assertions.declared_keys(metadata)
    if "client_secret" in metadata or "client_secret_expires_at" in metadata:
        raise DocumentRefused(
            'it carries "client_secret", which a published document must never hold',
            'remove "client_secret" (and revoke that secret: it is public now)',
        )
    redirect_uris = metadata.get("redirect_uris")
    if not isinstance(redirect_uris, list) or not redirect_uris or not all(isinstance(u, str) for u in redirect_uris):
        raise DocumentRefused(
            'it lists no "redirect_uris"',
            'add "redirect_uris": the addresses the application receives its authorization codes at',
        )
    grant_types = metadata.get("grant_types", ["authorization_code"])
    if (
        not isinstance(grant_types, list)
        or "authorization_code" not in grant_types
        or not set(map(str, grant_types)) <= {"authorization_code", "refresh_token"}
    ):
        raise DocumentRefused(
            'its "grant_types" are not "authorization_code" (with "refresh_token"), the only ones this server serves',
            'declare "grant_types": ["authorization_code", "refresh_token"]',
        )
    if not isinstance(metadata.get("client_name", ""), str):
        raise DocumentRefused('its "client_name" is not a text', 'make "client_name" a string, or leave it out')
    return declaration


class CodexMetadataFetcher(HardenedFetcher):
    def fetch(self, client_id: str):
        try:
            metadata, max_age = super().fetch(client_id)
            declaration = _check_document(client_id, metadata)
        except DocumentRefused as error:
            self._remember_refusal(client_id, error.problem, error.fix)
            raise
        except CIMDError as error:
            self._remember_refusal(client_id, f"it could not be read ({error})", _DOCUMENT_FIX)
            raise
        client_assertions.remember(client_id, declaration)
        public = {key: value for key, value in metadata.items() if key not in _AUTHENTICATION_MEMBERS}
        return public, max_age

    @staticmethod
    def _remember_refusal(client_id: str, problem: str, fix: str) -> None:
        # As long as DOT's backoff on this document, during which it answers "unknown client"
        # without fetching again.
        timeout = oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS + 5
        _notes().set(_refusal_key(client_id), {"problem": problem, "fix": fix}, timeout=timeout)
