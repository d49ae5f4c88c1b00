"""Fetching Client ID Metadata Documents.

Production uses django-oauth-toolkit's request-forgery-hardened fetcher unchanged:
https only, public addresses only, no redirects, size and time limits. Only when
``CODEX_CIMD_ALLOW_LOOPBACK`` is on (debug, and the test runner) does a client_id on
a loopback address go to ``authserver.cimd_loopback`` instead, so that a locally
run client or a test can serve its own document. That module is never imported
otherwise.
"""

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from oauth2_provider.cimd import SafeMetadataFetcher, is_cimd_client_id


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
        if settings.CODEX_CIMD_ALLOW_LOOPBACK and _is_loopback(urlsplit(client_id).hostname):
            from authserver.cimd_loopback import fetch_from_loopback  # debug and tests only

            return fetch_from_loopback(self, client_id)
        return super().fetch(client_id)
