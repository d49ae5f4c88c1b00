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
from oauth2_provider.cimd import SafeMetadataFetcher


def _is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class CodexMetadataFetcher(SafeMetadataFetcher):
    def fetch(self, client_id: str):
        if settings.CODEX_CIMD_ALLOW_LOOPBACK and _is_loopback(urlsplit(client_id).hostname):
            from authserver.cimd_loopback import fetch_from_loopback  # debug and tests only

            return fetch_from_loopback(self, client_id)
        return super().fetch(client_id)
