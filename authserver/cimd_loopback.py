"""Client ID Metadata Documents served from this machine: debug and tests only.

``authserver.cimd.CodexMetadataFetcher`` calls this only when
``CODEX_CIMD_ALLOW_LOOPBACK`` is on and the client_id's host is a loopback
address. It skips certificate verification (a local client's or a test's
self-signed certificate) and DOT's public-address rule, so it must never be
enabled in production.

It leans on two private names of django-oauth-toolkit (pinned in requirements.txt,
listed in ``common.internals``): ``oauth2_provider.cimd._validate_client_id_url`` (the
CIMD URL rules) and ``SafeMetadataFetcher._read_document`` (status, media type, size and
JSON checks), so a loopback document passes exactly the checks a public one does.
``tests/test_internals.py`` fails when DOT's version is not one checked, and
``tests/test_cimd.py`` when either name moves; re-read both in the new release before
adding it to ``common.internals.CHECKED``.
"""

import warnings

import urllib3
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher, _validate_client_id_url
from oauth2_provider.settings import oauth2_settings


def fetch_from_loopback(fetcher: SafeMetadataFetcher, client_id: str):
    """DOT's fetch for a loopback client_id: same URL and document rules, no certificate check."""
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
            return fetcher._read_document(response)
        finally:
            response.release_conn()
    except urllib3.exceptions.HTTPError as error:
        raise CIMDError(f"could not fetch client_id document: {error}") from None
    finally:
        pool.close()
