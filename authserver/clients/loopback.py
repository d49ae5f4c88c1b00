"""Loopback hosts: what counts as one (``is_loopback``, asked by every rule that treats this
machine apart), and fetching from one, which only debug and tests do.

``authserver.clients.fetching`` fetches from a loopback address only when
``CODEX_CIMD_ALLOW_LOOPBACK`` is on (and the server refuses to start with that setting outside
debug, ``codex_site.checks``). It then allows what production refuses: a loopback address
(``loopback_addresses``), and a certificate it cannot check (``unverified``: a local client's or a
test's self-signed one). Everything else (the URL rules, the deadline, the slots, the reading of
the answer) is the production fetch's.
"""

import contextlib
import ipaddress
import socket
import ssl
import warnings
from collections.abc import Iterator

import urllib3
from oauth2_provider.cimd import CIMDError


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a name or an address, IPv6 without brackets) is this machine: ``localhost``
    or a loopback address."""
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_addresses(host: str, port: int) -> list[str]:
    """The loopback addresses ``host`` resolves to; a name that resolves elsewhere is refused."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as error:
        raise CIMDError(f"could not resolve {host}: {error}") from None
    addresses = [info[4][0] for info in infos]
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
