"""Client ID Metadata Documents and key sets served from this machine: debug and tests only.

``authserver.fetching`` imports this only when ``CODEX_CIMD_ALLOW_LOOPBACK`` is on and the
address's host is a loopback one (and the server refuses to start with that setting outside
debug, ``codex_site.checks``). It allows what production refuses: a loopback address, and a
certificate it cannot check (a local client's or a test's self-signed one). Everything else
(the URL rules, the deadline, the slots, the reading of the answer) is the production fetch's.
"""

import contextlib
import socket
import ssl
import warnings
from collections.abc import Iterator

import urllib3
from oauth2_provider.cimd import CIMDError


def loopback_addresses(host: str, port: int) -> list[str]:
    """The loopback addresses ``host`` resolves to; a name that resolves elsewhere is refused."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as error:
        raise CIMDError(f"could not resolve {host}: {error}") from None
    addresses = [info[4][0] for info in infos]
    from authserver.fetching import is_loopback

    if not addresses or not all(is_loopback(address) for address in addresses):
        raise CIMDError(f"{host} does not resolve to loopback addresses only")
    return addresses


@contextlib.contextmanager
def unverified(context: ssl.SSLContext) -> Iterator[None]:
    """Within the block, ``context`` accepts any certificate, and urllib3 does not warn that it
    does (loopback only, debug and tests only)."""
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", urllib3.exceptions.InsecureRequestWarning)
        yield
