"""Fetching the JSON documents a client names: its metadata document and its key set.

Production uses django-oauth-toolkit's request-forgery-hardened fetcher unchanged:
https only, public addresses only, no redirects, size and time limits. Only when
``CODEX_CIMD_ALLOW_LOOPBACK`` is on (debug, and the test runner) does a URL on a loopback
address go to ``authserver.cimd_loopback`` instead, so that a locally run client or a test
can serve its own documents. That module is never imported otherwise.
"""

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings
from oauth2_provider.cimd import SafeMetadataFetcher


def is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HardenedFetcher(SafeMetadataFetcher):
    """``fetch(url)`` returns ``(document, max_age_seconds)`` or raises ``CIMDError``."""

    def fetch(self, url: str):
        if settings.CODEX_CIMD_ALLOW_LOOPBACK and is_loopback(urlsplit(url).hostname):
            from authserver.cimd_loopback import fetch_from_loopback  # debug and tests only

            return fetch_from_loopback(self, url)
        return super().fetch(url)
