"""Fetching the JSON documents a client names: its metadata document and its key set.

Every fetch this server makes is a request to an address a stranger chose, so each is bounded
in what it may reach, how long it may take and how many may run at once:

- **Where**: django-oauth-toolkit's request-forgery rules, unchanged (``_validate_client_id_url``:
  https, a host, no userinfo or fragment; ``_resolve_and_validate``: every address the name
  resolves to is public; the connection goes to that checked address, with SNI, certificate and
  Host for the name; no redirects), and its reading of the answer (``_read_document``: status 200,
  a JSON media type, at most ``CIMD_MAX_DOCUMENT_SIZE``, an object; the ``Cache-Control``
  lifetime clamped). Only with ``CODEX_CIMD_ALLOW_LOOPBACK`` (development and tests; the server
  refuses to start with it outside debug) may a loopback address be fetched, without a
  certificate check (``authserver.clients.loopback``).
- **How long**: one wall-clock deadline, ``CIMD_FETCH_TIMEOUT_SECONDS`` from the start, over the
  whole exchange: the name's resolution, the connection, TLS, the request, the headers and every
  byte of the body. DOT's own fetcher bounds each read (a remote sending a byte every half
  second held a request for 15 s), so this module makes the connection itself, with a TLS socket
  whose every operation may wait only until the deadline (``ssl.SSLContext.sslsocket_class``).
- **How many**: one cap on the fetches in progress in this process (``CODEX_FETCHES_AT_ONCE``),
  documents and key sets alike, and a smaller one per client network
  (``CODEX_FETCHES_AT_ONCE_PER_ADDRESS``, ``common.ratelimit.network_of``), so that one network's
  slow documents cannot hold every slot while real clients wait. A fetch that finds no slot is
  not made (``FetchBusy``), and says so.
"""

import contextlib
import ssl
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import urllib3
from django.conf import settings
from oauth2_provider.cimd import CIMDError, SafeMetadataFetcher, _resolve_and_validate, _validate_client_id_url
from oauth2_provider.settings import oauth2_settings

from authserver.clients.loopback import is_loopback, loopback_addresses, unverified


class FetchBusy(CIMDError):
    """Every fetch slot (of the process, or of the caller's network) is in use: nothing was fetched."""


class FetchTooSlow(CIMDError):
    """The remote did not answer in full before the deadline."""


# --- the one cap -------------------------------------------------------------------------------


class _Slots:
    """The fetches in progress in this process, in all and per client network."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_use = 0
        self._by_network: Counter[str] = Counter()

    def take(self, network: str | None) -> bool:
        with self._lock:
            if self._in_use >= settings.CODEX_FETCHES_AT_ONCE:
                return False
            if network is not None and self._by_network[network] >= settings.CODEX_FETCHES_AT_ONCE_PER_ADDRESS:
                return False
            self._in_use += 1
            if network is not None:
                self._by_network[network] += 1
            return True

    def give_back(self, network: str | None) -> None:
        with self._lock:
            self._in_use -= 1
            if network is not None:
                self._by_network[network] -= 1
                if not self._by_network[network]:
                    del self._by_network[network]

    def in_use(self) -> int:
        with self._lock:
            return self._in_use


SLOTS = _Slots()


class _Slot:
    """One slot, given back when the last of its holders is done: the fetch, and a name
    resolution still running after the fetch gave up on it (it cannot be interrupted)."""

    def __init__(self, network: str | None) -> None:
        self._network = network
        self._holders = 1
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            last = self._holders == 0
        if last:
            SLOTS.give_back(self._network)


# --- the deadline ------------------------------------------------------------------------------


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; ``FetchTooSlow`` (a ``TimeoutError`` to the socket's callers) when none."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError("the fetch's deadline passed")
        return left


class _DeadlineSocket(ssl.SSLSocket):
    """A TLS socket whose every blocking operation waits at most until the fetch's deadline.

    A subclass is made per fetch, carrying its deadline (``deadline``); the context's
    ``sslsocket_class`` makes the TLS socket one of these. Each call sets the socket's timeout to
    the time left, so the sum of all waits (handshake, request, headers, body) cannot pass it."""

    deadline: _Deadline

    def do_handshake(self, *args: Any, **kwargs: Any) -> None:
        self.settimeout(self.deadline.remaining())
        super().do_handshake(*args, **kwargs)

    def recv(self, *args: Any, **kwargs: Any) -> bytes:
        self.settimeout(self.deadline.remaining())
        return super().recv(*args, **kwargs)

    def recv_into(self, *args: Any, **kwargs: Any) -> int:
        self.settimeout(self.deadline.remaining())
        return super().recv_into(*args, **kwargs)

    def send(self, *args: Any, **kwargs: Any) -> int:
        self.settimeout(self.deadline.remaining())
        return super().send(*args, **kwargs)

    def sendall(self, *args: Any, **kwargs: Any) -> None:
        self.settimeout(self.deadline.remaining())
        super().sendall(*args, **kwargs)


def _resolve(host: str, port: int, *, loopback: bool, deadline: _Deadline, slot: _Slot) -> list[str]:
    """The addresses to connect to, resolved on a thread of its own so that a name server that
    does not answer holds this request only until the deadline (the thread keeps the fetch's
    slot until the resolver gives up)."""
    found: dict[str, Any] = {}
    done = threading.Event()

    def resolve() -> None:
        try:
            if loopback:
                found["addresses"] = loopback_addresses(host, port)
            else:
                found["addresses"] = _resolve_and_validate(host, port)
        except Exception as error:
            found["error"] = error
        finally:
            done.set()
            slot.release()

    slot.hold()
    threading.Thread(target=resolve, name="codex-fetch-resolve", daemon=True).start()
    try:
        finished = done.wait(deadline.remaining())
    except TimeoutError:
        finished = done.is_set()
    if not finished:
        raise FetchTooSlow(f"{host} was not resolved within the fetch's deadline")
    if "error" in found:
        error = found["error"]
        raise error if isinstance(error, CIMDError) else CIMDError(f"could not resolve {host}: {error}")
    return found["addresses"]


class HardenedFetcher(SafeMetadataFetcher):
    """``fetch(url)`` returns ``(document, max_age_seconds)`` or raises ``CIMDError``
    (``FetchBusy`` when no slot was free: then nothing was fetched). ``network`` is the client
    network the fetch is made for, if a request of its caused it (its share of the slots)."""

    def __init__(self, network: str | None = None) -> None:
        self.network = network

    def fetch(self, url: str):
        parsed = _validate_client_id_url(url)
        if not SLOTS.take(self.network):
            raise FetchBusy("every fetch slot is in use just now")
        slot = _Slot(self.network)
        try:
            return self._fetch(parsed, deadline=_Deadline(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS), slot=slot)
        except TimeoutError:
            raise FetchTooSlow(
                f"it was not served in full within {oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS} seconds"
            ) from None
        finally:
            slot.release()

    def _fetch(self, parsed: Any, *, deadline: _Deadline, slot: _Slot):
        host, port = parsed.hostname, parsed.port or 443
        loopback = settings.CODEX_CIMD_ALLOW_LOOPBACK and is_loopback(host)
        addresses = _resolve(host, port, loopback=loopback, deadline=deadline, slot=slot)
        context = ssl.create_default_context()
        trust: contextlib.AbstractContextManager = contextlib.nullcontext()
        if loopback:
            trust = unverified(context)
        context.sslsocket_class = type("FetchSocket", (_DeadlineSocket,), {"deadline": deadline})
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        # parsed.netloc is the authority without userinfo (refused above): the port and an IPv6
        # address's brackets, as the Host header needs them.
        headers = {"Host": parsed.netloc, "Accept": "application/json, application/*+json"}
        last_error: Exception | None = None
        with trust:
            for address in addresses:
                remaining = deadline.remaining()
                pool = urllib3.HTTPSConnectionPool(
                    host=address,
                    port=port,
                    timeout=urllib3.Timeout(connect=remaining, read=remaining),
                    retries=False,
                    maxsize=1,
                    ssl_context=context,
                    server_hostname=host,
                    cert_reqs=context.verify_mode,
                )
                try:
                    response = pool.urlopen("GET", path, headers=headers, redirect=False, preload_content=False)
                    try:
                        return self._read_document(response)
                    finally:
                        response.release_conn()
                except (urllib3.exceptions.HTTPError, OSError) as error:
                    if time.monotonic() >= deadline.at:
                        raise TimeoutError from None
                    last_error = error
                finally:
                    pool.close()
        raise CIMDError(f"could not fetch {urlsplit(parsed.geturl()).netloc}: {last_error}")
