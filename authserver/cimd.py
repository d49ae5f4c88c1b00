"""Fetching Client ID Metadata Documents.

Production uses django-oauth-toolkit's request-forgery-hardened fetcher unchanged:
https only, public addresses only, no redirects, size and time limits. With
``CODEX_CIMD_ALLOW_LOOPBACK`` (on only in debug and tests) a client_id on a loopback
address is fetched directly, without certificate verification, so a locally run
client or a test can serve its own document.
"""

import ipaddress
import warnings
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher, _validate_client_id_url, is_cimd_client_id
from oauth2_provider.settings import oauth2_settings


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refusal_hint(client_id: str) -> str | None:
    """Why a metadata document on a loopback address was refused, for the error page.

    DOT's fetcher refuses such addresses without saying so (the person sees only
    "Invalid client_id parameter value"); a developer running a client locally against
    a server with debug off needs to know which setting decides.
    """
    if settings.CODEX_CIMD_ALLOW_LOOPBACK or not is_cimd_client_id(client_id):
        return None
    if not _is_loopback(urlsplit(client_id).hostname):
        return None
    return (
        "This application's client ID is a metadata document on a loopback address "
        f"({urlsplit(client_id).netloc}). This server fetches metadata documents only from public "
        "addresses, except in development (DJANGO_DEBUG=1, or CODEX_CIMD_ALLOW_LOOPBACK=1, which must "
        "never be on in production). Serve the document from a public HTTPS address, or register "
        "the application with Dynamic Client Registration instead."
    )


class CodexMetadataFetcher(SafeMetadataFetcher):
    def fetch(self, client_id: str):
        host = urlsplit(client_id).hostname
        if not (settings.CODEX_CIMD_ALLOW_LOOPBACK and _is_loopback(host)):
            return super().fetch(client_id)
        parsed = _validate_client_id_url(client_id)
        timeout = oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        pool = urllib3.HTTPSConnectionPool(
            host=parsed.hostname,
            port=parsed.port or 443,
            timeout=urllib3.Timeout(total=timeout),
            retries=False,
            maxsize=1,
            cert_reqs="CERT_NONE",  # loopback only, debug/tests only
        )
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
                response = pool.urlopen(
                    "GET", path, headers={"Accept": "application/json"}, redirect=False, preload_content=False
                )
            try:
                return self._read_document(response)
            finally:
                response.release_conn()
        except urllib3.exceptions.HTTPError as error:
            raise CIMDError(f"could not fetch client_id document: {error}") from None
        finally:
            pool.close()
