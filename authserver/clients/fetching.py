"""Fetching the JSON documents a client names: its metadata document and its key set.

Every fetch this server makes is a request to an address a stranger chose, so each is bounded
in what it may reach, how long it may take and how many may run at once:

- **Where**: django-oauth-toolkit's request-forgery rules, unchanged (``_validate_client_id_url``:
  https, a host, no userinfo or fragment; ``_resolve_and_validate``: every address the name
  resolves to is public; the connection goes to that checked address, with SNI, certificate and
  Host for the name; no redirects), and its rules for the answer (status 200, a JSON media type,
  at most ``CIMD_MAX_DOCUMENT_SIZE``, an object; the ``Cache-Control`` lifetime clamped by DOT's
  ``_effective_max_age``). The body is read as any stranger's JSON is
  (``HardenedFetcher._read_document``, ``common.inputs.json_document``), so that nesting past the
  parser's limit and a lone surrogate are refused in words: DOT's ``json.loads`` raises
  ``RecursionError`` on the one and lets the other through to a row no database can store. Only
  with ``CODEX_CIMD_ALLOW_LOOPBACK`` (development and tests; the server refuses to start with it
  outside debug) may a loopback address be fetched, without a certificate check
  (``authserver.clients.loopback``).
- **How long**: one wall-clock deadline, ``CIMD_FETCH_TIMEOUT_SECONDS`` from the start, over the
  whole exchange: the name's resolution, the connection, TLS, the request, the headers and every
  byte of the body. DOT's own fetcher bounds each read (a remote sending a byte every half
  second held a request for 15 s), so this module makes the connection itself, with a TLS socket
  whose every operation may wait only until the deadline (``ssl.SSLContext.sslsocket_class``).
- **How many**: one cap on the fetches in progress in this process (``CODEX_FETCHES_AT_ONCE``),
  documents and key sets alike, of which one client network may hold
  ``CODEX_FETCHES_AT_ONCE_PER_ADDRESS`` (``common.ratelimit.network_of``: an IPv6 /64) and one
  block of networks ``CODEX_FETCHES_AT_ONCE_PER_BLOCK`` (``common.ratelimit.block_of``: an IPv6
  /48, an IPv4 /24). A fetch that finds its network's or block's share in use is not made
  (``FetchBusy``), and says so.
- **Who waits**: when every slot is taken, a newcomer takes the slot of the fetch that has run
  longest past ``CODEX_FETCH_PATIENCE_SECONDS`` (well more than a working document server needs,
  well under the deadline), or else of the longest-running fetch of a block holding at least two
  slots more than the newcomer's (``_Slots._victim``). The newcomer's thread shuts that fetch's
  socket down (``_Fetch.stop``), whatever it waits on (the connection, the TLS handshake, the
  answer), and that fetch ends at once: as too slow when it had run past the patience
  (``FetchYielded``, held against its remote as a fetch past the deadline is), as busy when it
  had not (``FetchCrowdedOut``: nothing is held against a remote this server cut short). A fetch still resolving its
  name gives its slot up too while fewer resolutions than slots linger on (a resolver cannot be
  interrupted: its thread runs on, counted, to the resolver's end). So to keep newcomers out,
  every slot must be held, at every moment, by a fetch younger than the patience from a block of
  its own: ``CODEX_FETCHES_AT_ONCE`` blocks, started again and again (``docs/architecture.md``,
  "work a stranger can cause", has the arithmetic); and a slow but working document still gets
  the whole deadline while nobody else needs its slot.
"""

import contextlib
import socket
import ssl
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import urllib3
import urllib3.connection
from django.conf import settings
from oauth2_provider.cimd import (
    CIMDError,
    SafeMetadataFetcher,
    _effective_max_age,
    _resolve_and_validate,
    _validate_client_id_url,
)
from oauth2_provider.settings import oauth2_settings

from authserver.clients.loopback import is_loopback, loopback_addresses, unverified
from common.inputs import JSONRefused, json_document, shown
from common.ratelimit import block_of


class FetchBusy(CIMDError):
    """Every fetch slot (of the process, or of the caller's network or block) is in use, and none
    was given up to this fetch: nothing was fetched."""


class FetchTooSlow(CIMDError):
    """The remote did not answer in full before the deadline."""


class FetchYielded(FetchTooSlow):
    """The fetch ran past the patience while every slot was taken, and gave its slot up to a
    newcomer: it ended as too slow."""


class FetchCrowdedOut(FetchBusy):
    """The fetch gave its slot up before the patience, its network block holding more slots than
    the newcomer's: it ended as busy (nothing is held against its remote)."""


# --- the one cap -------------------------------------------------------------------------------


class _Fetch:
    """One fetch in progress and the slot it holds: whose it is (its client network and that
    network's block), when it began, and the socket it waits on, which a newcomer's thread may shut
    down (``stop``). ``resolving``, ``ended``, ``holding`` and ``lingering`` change under the lock
    of ``SLOTS``; ``_watched``, ``yielded``, ``too_slow`` and ``ran`` under the fetch's own."""

    def __init__(self, network: str | None) -> None:
        self.network = network
        self.block = block_of(network) if network is not None else None
        self.began = time.monotonic()
        self.resolving = False  # its name's resolver thread is running
        self.ended = False  # the fetch itself has returned or raised
        self.holding = True  # it counts among the slots in use
        self.lingering = False  # it gave its slot up while its resolver ran on
        self.yielded = False
        self.too_slow = False  # it yielded having run past the patience
        self.ran = 0.0  # how long it had run when it yielded
        self.woken = threading.Event()  # set when its resolver finishes, and when it yields
        self._lock = threading.Lock()
        # A duplicate of the connection's descriptor: shutting it down ends every wait on that
        # connection (TLS shares the descriptor), and, being this fetch's own, it can never name
        # another connection that reused a closed descriptor's number.
        self._watched: socket.socket | None = None

    def watch(self, connection: socket.socket) -> None:
        """Make ``connection`` (a new TCP socket, before it connects) the one ``stop`` shuts down;
        raises as ``check`` does if the fetch has given its slot up already."""
        with self._lock:
            self.check()
            previous, self._watched = self._watched, connection.dup()
        if previous is not None:
            previous.close()

    def check(self) -> None:
        """``FetchYielded`` or ``FetchCrowdedOut`` once the fetch has given its slot up."""
        if not self.yielded:
            return
        if self.too_slow:
            raise FetchYielded(
                f"it had not been served after {self.ran:.1f} seconds, when every fetch slot of this server was "
                "in use and another application's document needed one"
            )
        raise FetchCrowdedOut(
            "every fetch slot of this server was in use, and more of them were fetching for this client's "
            "network block than for any other: this fetch gave its slot to another's"
        )

    def stop(self, *, too_slow: bool) -> None:
        """Called from the thread of the newcomer that took this fetch's slot: every wait of the
        fetch ends now (a socket shut down answers at once; a resolution's wait is woken).
        ``too_slow``: it had run past the patience."""
        with self._lock:
            self.ran = time.monotonic() - self.began
            self.too_slow = too_slow
            self.yielded = True
            if self._watched is not None:
                with contextlib.suppress(OSError):
                    self._watched.shutdown(socket.SHUT_RDWR)
        self.woken.set()

    def forget_connection(self) -> None:
        with self._lock:
            watched, self._watched = self._watched, None
        if watched is not None:
            watched.close()


class _Slots:
    """The fetches in progress in this process: who holds the slots, in all, per client network
    and per block; and the resolver threads still running for fetches that gave their slot up."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holding: list[_Fetch] = []
        self._by_network: Counter[str] = Counter()
        self._by_block: Counter[str] = Counter()
        self._lingering = 0

    def take(self, network: str | None) -> _Fetch | None:
        """A slot for a fetch made for ``network``, or None (busy). When every slot is taken, a
        fetch gives its slot up to this one (``_victim``): it is stopped here, in the newcomer's
        thread, once the books say the slot is the newcomer's."""
        fetch = _Fetch(network)
        with self._lock:
            if fetch.network is not None and (
                self._by_network[fetch.network] >= settings.CODEX_FETCHES_AT_ONCE_PER_ADDRESS
                or self._by_block[fetch.block] >= settings.CODEX_FETCHES_AT_ONCE_PER_BLOCK
            ):
                return None
            victim = None
            if len(self._holding) >= settings.CODEX_FETCHES_AT_ONCE:
                victim = self._victim(fetch)
                if victim is None:
                    return None
                too_slow = victim.began <= fetch.began - settings.CODEX_FETCH_PATIENCE_SECONDS
                self._remove(victim)
                if victim.resolving:
                    victim.lingering = True
                    self._lingering += 1
            self._add(fetch)
        if victim is not None:
            victim.stop(too_slow=too_slow)
        return fetch

    def _victim(self, newcomer: _Fetch) -> _Fetch | None:
        """Whose slot a newcomer takes while every slot is taken: the fetch that has run longest
        past the patience; failing that, the longest-running fetch of the block that holds the
        most slots, if it holds at least two more than the newcomer's block (so no block keeps
        more than an even part from another while the slots are short). None: the newcomer waits
        for nobody, and is told the server is busy."""
        stoppable = [
            held
            for held in self._holding
            # A resolver cannot be stopped: its thread runs on, so only so many may linger.
            if not held.resolving or self._lingering < settings.CODEX_FETCHES_AT_ONCE
        ]
        patient_since = newcomer.began - settings.CODEX_FETCH_PATIENCE_SECONDS
        if past := [held for held in stoppable if held.began <= patient_since]:
            return min(past, key=lambda held: held.began)
        own = self._by_block[newcomer.block] if newcomer.block is not None else 0
        crowded = [held for held in stoppable if held.block is not None and self._by_block[held.block] >= own + 2]
        if not crowded:
            return None
        most = max(self._by_block[held.block] for held in crowded)
        return min((held for held in crowded if self._by_block[held.block] == most), key=lambda held: held.began)

    def _add(self, fetch: _Fetch) -> None:
        self._holding.append(fetch)
        if fetch.network is not None:
            self._by_network[fetch.network] += 1
            self._by_block[fetch.block] += 1

    def _remove(self, fetch: _Fetch) -> None:
        fetch.holding = False
        self._holding.remove(fetch)
        if fetch.network is not None:
            for counter, key in ((self._by_network, fetch.network), (self._by_block, fetch.block)):
                counter[key] -= 1
                if not counter[key]:
                    del counter[key]

    def resolving(self, fetch: _Fetch) -> None:
        with self._lock:
            fetch.resolving = True

    def resolved(self, fetch: _Fetch) -> None:
        """The fetch's resolver thread is done: the slot goes back if the fetch has ended too (a
        fetch that gave up on its resolver at the deadline keeps its slot until then)."""
        with self._lock:
            fetch.resolving = False
            if fetch.lingering:
                self._lingering -= 1
            elif fetch.ended and fetch.holding:
                self._remove(fetch)

    def ended(self, fetch: _Fetch) -> None:
        with self._lock:
            fetch.ended = True
            if fetch.holding and not fetch.resolving:
                self._remove(fetch)

    def in_use(self) -> int:
        with self._lock:
            return len(self._holding)


SLOTS = _Slots()


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
    """A TLS socket whose every blocking operation waits at most until the fetch's deadline, and
    not at all once the fetch has given its slot up.

    A subclass is made per fetch, carrying its deadline (``deadline``) and the fetch (``fetch``);
    the context's ``sslsocket_class`` makes the TLS socket one of these. Each call sets the
    socket's timeout to the time left, so the sum of all waits (handshake, request, headers,
    body) cannot pass it; a wait under way when the fetch yields ends as its socket is shut down."""

    deadline: _Deadline
    fetch: _Fetch

    def _wait_at_most(self) -> None:
        self.fetch.check()
        self.settimeout(self.deadline.remaining())

    def do_handshake(self, *args: Any, **kwargs: Any) -> None:
        self._wait_at_most()
        super().do_handshake(*args, **kwargs)

    def recv(self, *args: Any, **kwargs: Any) -> bytes:
        self._wait_at_most()
        return super().recv(*args, **kwargs)

    def recv_into(self, *args: Any, **kwargs: Any) -> int:
        self._wait_at_most()
        return super().recv_into(*args, **kwargs)

    def send(self, *args: Any, **kwargs: Any) -> int:
        self._wait_at_most()
        return super().send(*args, **kwargs)

    def sendall(self, *args: Any, **kwargs: Any) -> None:
        self._wait_at_most()
        super().sendall(*args, **kwargs)


class _WatchedConnection(urllib3.connection.HTTPSConnection):
    """urllib3's HTTPS connection whose TCP socket the fetch watches from before it connects, so
    that a connection attempt a remote never answers ends as soon as the fetch yields. A subclass
    is made per fetch, carrying it (``fetch``). (``_new_conn`` is urllib3's, registered in
    ``common.internals``: the connection's one place that makes the socket.)"""

    fetch: _Fetch

    def _new_conn(self) -> socket.socket:
        address = self.host.strip("[]")
        connection = socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM)
        try:
            self.fetch.watch(connection)
            connection.settimeout(self.timeout)
            connection.connect((address, self.port))
            self.fetch.check()
        except TimeoutError as error:
            connection.close()
            raise urllib3.exceptions.ConnectTimeoutError(self, f"connecting to {address} timed out") from error
        except OSError as error:
            connection.close()
            raise urllib3.exceptions.NewConnectionError(self, f"could not connect to {address}: {error}") from error
        except BaseException:
            connection.close()
            raise
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection


def _resolve(host: str, port: int, *, loopback: bool, deadline: _Deadline, fetch: _Fetch) -> list[str]:
    """The addresses to connect to, resolved on a thread of its own so that a name server that
    does not answer holds this request only until the deadline, or until the fetch yields (the
    thread keeps the fetch's slot until the resolver gives up, unless the fetch gave it up)."""
    found: dict[str, Any] = {}

    def resolve() -> None:
        try:
            if loopback:
                found["addresses"] = loopback_addresses(host, port)
            else:
                found["addresses"] = _resolve_and_validate(host, port)
        except Exception as error:
            found["error"] = error
        finally:
            found["done"] = True
            SLOTS.resolved(fetch)
            fetch.woken.set()

    SLOTS.resolving(fetch)
    threading.Thread(target=resolve, name="codex-fetch-resolve", daemon=True).start()
    with contextlib.suppress(TimeoutError):  # no time left: the deadline passed already
        fetch.woken.wait(deadline.remaining())
    fetch.check()
    if "done" not in found:
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
        fetch = SLOTS.take(self.network)
        if fetch is None:
            raise FetchBusy("every fetch slot is in use just now")
        try:
            return self._fetch(parsed, deadline=_Deadline(oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS), fetch=fetch)
        except TimeoutError:
            raise FetchTooSlow(
                f"it was not served in full within {oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS} seconds"
            ) from None
        finally:
            fetch.forget_connection()
            SLOTS.ended(fetch)

    def _fetch(self, parsed: Any, *, deadline: _Deadline, fetch: _Fetch):
        host, port = parsed.hostname, parsed.port or 443
        loopback = settings.CODEX_CIMD_ALLOW_LOOPBACK and is_loopback(host)
        addresses = _resolve(host, port, loopback=loopback, deadline=deadline, fetch=fetch)
        context = ssl.create_default_context()
        trust: contextlib.AbstractContextManager = contextlib.nullcontext()
        if loopback:
            trust = unverified(context)
        context.sslsocket_class = type("FetchSocket", (_DeadlineSocket,), {"deadline": deadline, "fetch": fetch})
        connection_class = type("FetchConnection", (_WatchedConnection,), {"fetch": fetch})
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
                pool.ConnectionCls = connection_class
                try:
                    response = pool.urlopen("GET", path, headers=headers, redirect=False, preload_content=False)
                    try:
                        return self._read_document(response)
                    finally:
                        response.release_conn()
                except (urllib3.exceptions.HTTPError, OSError) as error:
                    fetch.check()  # a wait that ended because the fetch yielded
                    if time.monotonic() >= deadline.at:
                        raise TimeoutError from None
                    last_error = error
                finally:
                    pool.close()
        raise CIMDError(f"could not fetch {urlsplit(parsed.geturl()).netloc}: {last_error}")

    def _read_document(self, response: Any) -> tuple[dict[str, Any], int]:
        """The answer's document and how long it may be kept, or ``CIMDError`` saying why not.

        DOT's rules for the answer (``SafeMetadataFetcher._read_document``, which this replaces),
        with the body read as any stranger's JSON is: ``json_document`` refuses in words what
        ``json.loads`` turns into a ``RecursionError`` or lets through as a lone surrogate."""
        if response.status != 200:
            raise CIMDError(f"the answer was HTTP {response.status}, not 200")
        media_type = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media_type != "application/json" and not (
            media_type.startswith("application/") and media_type.endswith("+json")
        ):
            raise CIMDError(f"the answer is not JSON (Content-Type: {shown(media_type, max_chars=60)!r})")
        max_size = oauth2_settings.CIMD_MAX_DOCUMENT_SIZE
        body = response.read(max_size + 1)
        if len(body) > max_size:
            raise CIMDError(f"the answer is larger than {max_size} bytes")
        try:
            document = json_document(body, must_be_object=True)
        except JSONRefused as refused:
            raise CIMDError("the answer " + refused.problem.removeprefix("it ")) from None
        return document, _effective_max_age(response.headers.get("Cache-Control"))
