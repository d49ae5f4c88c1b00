"""A fixed-window rate limit per client network (or token), kept in the ``default`` cache (the
database cache that never evicts a live entry and fails closed, ``common.durable_cache``, so
every worker process shares the counts and no flood of other entries resets them);
``allow_batched`` for hot paths writes the cache once per batch of calls.

Every per-address limit and record of this server keys a client by ``network_of`` its address:
an IPv4 address itself, an IPv6 address's /64 (the allocation of one subscriber, in which a host
can take any address it likes; rotating through it gains nothing). allauth's throttle is given
the same key (``authserver.people.signin``). A Django request's network is ``client_network``, an
oauthlib request's (what django-oauth-toolkit hands its validator and grants) is
``oauthlib_client_network``: the same answer for the same request, at every door.

**A peer with no address.** The address is the one uvicorn reports (``REMOTE_ADDR``: the peer, or
the client a trusted proxy names in ``X-Forwarded-For``). uvicorn reports none for a Unix socket
unless it trusts every peer's proxy headers (``CODEX_TRUSTED_PROXIES=*``, which ``codex_site.serve``
requires with ``--uds``), and a trusted proxy may pass on a name that is no address. Such a client
is ``UNKNOWN_PEER``, one client for every limit and every share: the server cannot tell such
requests apart, as it cannot tell apart the clients of a proxy it does not trust. Counting none
of them would let each stranger past every limit; counting each name apart would let a stranger
pick a fresh count per request. The first one a process meets is logged, as a WARNING, for the
operator to fix the set-up.
"""

import ipaddress
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.core.cache import cache
from django.db import OperationalError
from django.http import HttpRequest

logger = logging.getLogger(__name__)

IPV6_PREFIX = 64
IPV6_BLOCK_PREFIX = 48
IPV4_BLOCK_PREFIX = 24
UNKNOWN_PEER = "unknown"

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_unknown_peer_logged = threading.Event()


def ip_of(address: str | None) -> IPAddress | None:
    """A client address as uvicorn reports it, parsed: an IPv4-mapped IPv6 address (``::ffff:a.b.c.d``,
    a dual-stack socket's view of an IPv4 client) is that IPv4 address. None for no address, or
    for anything that is not one."""
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def client_ip(request: HttpRequest) -> IPAddress | None:
    """The client's address (uvicorn applies X-Forwarded-For only from trusted proxies), or None."""
    return ip_of(request.META.get("REMOTE_ADDR"))


def client_address(request: HttpRequest) -> str:
    """The client's address for a log line: as ``client_ip`` reads it, or ``UNKNOWN_PEER``."""
    ip = client_ip(request)
    return UNKNOWN_PEER if ip is None else str(ip)


def network_of(address: str | None) -> str:
    """The key of a client address for every per-address limit and record: an IPv4 address (an
    IPv4-mapped IPv6 one too) itself, any other IPv6 address its /64 (``2001:db8:1:2::/64``),
    and ``UNKNOWN_PEER`` for no address or anything that is not one."""
    ip = ip_of(address)
    if ip is None:
        if not _unknown_peer_logged.is_set():
            _unknown_peer_logged.set()
            logger.warning(
                "a request came with no client address uvicorn could name (a Unix socket without "
                "CODEX_TRUSTED_PROXIES=*, or a proxy that sent no address): every such request counts "
                "as one client, %r, for every limit",
                UNKNOWN_PEER,
            )
        return UNKNOWN_PEER
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((int(ip), IPV6_PREFIX), strict=False))
    return str(ip)


def block_of(network: str) -> str:
    """The wider block a client network (``network_of``'s key) lies in, for shares of something
    scarce that a stranger with many networks could otherwise hold alone (the fetch slots): an
    IPv6 network's /48 (``2001:db8:1::/48``), an IPv4 address's /24 (``192.0.2.0/24``). A site or
    a small provider's customer is usually given a /48; a /24 is the smallest block routed apart."""
    try:
        if "/" in network:
            return str(ipaddress.ip_network(network, strict=False).supernet(new_prefix=IPV6_BLOCK_PREFIX))
        ip = ipaddress.ip_address(network)
    except ValueError:
        return network
    prefix = IPV6_BLOCK_PREFIX if isinstance(ip, ipaddress.IPv6Address) else IPV4_BLOCK_PREFIX
    return str(ipaddress.ip_network((int(ip), prefix), strict=False))


def client_network(request: HttpRequest) -> str:
    """``network_of`` a Django request's client address."""
    return network_of(request.META.get("REMOTE_ADDR"))


def oauthlib_client_network(request: Any) -> str:
    """``network_of`` the client address of an oauthlib request, as django-oauth-toolkit makes one
    of a Django request: its headers are the Django request's ``META``."""
    return network_of((getattr(request, "headers", None) or {}).get("REMOTE_ADDR"))


def allow(bucket: str, network: str, *, limit: int, window_seconds: int) -> tuple[bool, int]:
    """Count one attempt of ``network`` (``network_of`` a client address); return (allowed,
    seconds until the window resets)."""
    now = int(time.time())
    window = now // window_seconds
    key = f"ratelimit:{bucket}:{network}:{window}"
    # add() is atomic on every cache backend: the first attempt creates the counter.
    if cache.add(key, 1, timeout=window_seconds + 1):
        count = 1
    else:
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, timeout=window_seconds + 1)
            count = 1
    retry_after = (window + 1) * window_seconds - now
    return count <= limit, retry_after


@dataclass
class _Window:
    """This process's view of one counter in one window."""

    window: int
    shared: int = 0  # the shared count as of this process's last flush
    pending: int = 0  # calls counted here and not yet added to the shared count


_windows: dict[str, _Window] = {}
_windows_lock = threading.Lock()


def batch_size(limit: int) -> int:
    """How many calls a process counts before adding them to the shared counter: 1 % of
    the limit, between 1 and 100 (so a small limit is counted exactly)."""
    return max(1, min(100, limit // 100))


def allow_batched(bucket: str, key: str, *, limit: int, window_seconds: int) -> tuple[bool, int]:
    """Like ``allow``, for hot paths: calls are counted in process memory and added to the
    shared counter (the cache, so every worker and host still shares one count) in batches
    of ``batch_size(limit)``, and at once whenever the count nears the limit. The cache is
    written once per batch instead of once per call.

    The price is a bounded overshoot: each other process may hold up to one batch it has
    not added yet, so at most ``processes * batch_size(limit)`` calls (1 % of the limit per
    process) pass beyond ``limit`` in a window.
    """
    now = int(time.time())
    window = now // window_seconds
    retry_after = (window + 1) * window_seconds - now
    batch = batch_size(limit)
    name = f"{bucket}:{key}"
    with _windows_lock:
        state = _windows.get(name)
        if state is None or state.window != window:
            if state is None and len(_windows) > 10_000:
                _forget_old_windows(window)
            state = _windows[name] = _Window(window)
        if state.shared > limit:
            return False, retry_after  # the shared count only grows within a window
        state.pending += 1
        if state.pending < batch and state.shared + state.pending + batch <= limit:
            return True, retry_after
        pending, state.pending = state.pending, 0
    # Outside the lock: one cache round trip for the whole batch.
    shared_key = f"ratelimit:{bucket}:{key}:{window}"
    # incr() first: only a window's first flush finds no counter.
    try:
        count = cache.incr(shared_key, pending)
    except ValueError:
        if cache.add(shared_key, pending, timeout=window_seconds + 1):
            count = pending
        else:  # another process created it meanwhile (a write that fails raises: common.durable_cache)
            try:
                count = cache.incr(shared_key, pending)
            except ValueError:
                # Neither there nor made: only a cache that drops failed writes silently could
                # do this. It is the storage failing: `unavailable`, as for any outage.
                raise OperationalError("the shared rate-limit counter could not be written") from None
    with _windows_lock:
        if state.window == window:
            state.shared = max(state.shared, count)
    return count <= limit, retry_after


def _forget_old_windows(window: int) -> None:
    """Drop counters of past windows (their unflushed calls no longer matter)."""
    for name in [name for name, state in _windows.items() if state.window != window]:
        del _windows[name]
