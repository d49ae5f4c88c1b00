"""A delaying TCP relay: the network's latency, jitter and stalls, in user space.

deploy/try_network.sh puts one in front of every service of every host of its topology:
the service listens on its host's loopback only, and the host's network address is served
by this relay, which forwards each connection to the service and holds every chunk of data,
in each direction, for a delay before passing it on. So every path between two hosts (a
client to the load balancer, nginx to a worker, a worker to PostgreSQL, replication, Patroni
to etcd, etcd's members to one another) pays the delay once each way, as on a network.
(The kernel of the machines this runs on has no ``netem`` queueing discipline; a relay in
user space is what is left.)

    python deploy/netrelay.py --listen 198.18.36.31:5432=127.0.0.1:5432 [--listen ...] \\
        --delay-ms 0.25 --control /run/relay.sock

What it keeps, as a network does:
- **order and bytes**: each direction of a connection is one FIFO; a chunk leaves no earlier
  than its arrival plus the delay, and never before the chunk ahead of it;
- **half-close and close**: an end of stream (or a reset) is passed on after the data before
  it, with the same delay;
- **backpressure**: past ``HIGH_WATER`` bytes held for one direction the relay stops reading
  from the sender, as a full TCP window would, so a slow reader slows its writer;
- **partitions are the kernel's**: a host cut off by ``ip route add blackhole`` or
  ``ip link set ... down`` loses the packets of the relay's connections like any other.

Rules, set on the command line or at any moment through the control socket (a UNIX socket
taking one JSON object per line), decide each chunk's delay: ``delay_ms``, plus a uniform
``jitter_ms`` (a varying delay), plus, with probability ``stall_probability`` per chunk, a
stall of up to ``stall_max_ms`` that holds the chunks behind it too (a lost segment waiting
for its retransmission, as TCP sees it). A rule may be limited to one listening ``port`` and
to connections from some ``peers``; the first rule that matches a connection wins, then the
default. The control socket also answers statistics per listener and peer: connections,
bytes, and *turns*: how many times the client sent data after having last received some,
which is the number of request-and-answer round trips on a protocol like PostgreSQL's or
HTTP/1.1's.

Timers: asyncio's epoll selector waits in whole milliseconds (``epoll_wait``), four times
the default delay; the selector here waits on the epoll descriptor with ``select()``, whose
timeout is in microseconds, then collects the events without waiting.
"""

import argparse
import asyncio
import collections
import contextlib
import ctypes
import json
import os
import random
import select
import selectors
import signal
import sys
from dataclasses import asdict, dataclass, field

HIGH_WATER = 4 * 1024 * 1024  # bytes held per direction before the sender is paused
LOW_WATER = 1024 * 1024
READ_SIZE = 256 * 1024
PR_SET_TIMERSLACK = 29  # prctl(2)
EOF = object()  # the end of one direction's stream, passed on in its turn


class FineEpollSelector(selectors.EpollSelector):
    """epoll, waited on with microsecond timeouts (``select()`` on its own descriptor)."""

    def select(self, timeout: float | None = None):
        if timeout is not None and timeout > 0:
            select.select([self.fileno()], [], [], timeout)
            timeout = 0
        return super().select(timeout)


@dataclass
class Rule:
    delay_ms: float = 0.25
    jitter_ms: float = 0.0
    stall_probability: float = 0.0
    stall_max_ms: float = 0.0
    port: int | None = None  # only connections to this listening port
    peers: list[str] | None = None  # only connections from these addresses

    def matches(self, port: int, peer: str) -> bool:
        return (self.port is None or self.port == port) and (self.peers is None or peer in self.peers)

    def hold(self, rng: random.Random) -> float:
        """Seconds one chunk is held."""
        milliseconds = self.delay_ms
        if self.jitter_ms > 0:
            milliseconds += rng.uniform(0, self.jitter_ms)
        if self.stall_probability > 0 and rng.random() < self.stall_probability:
            milliseconds += rng.uniform(0, self.stall_max_ms)
        return milliseconds / 1000


@dataclass
class Counters:
    connections: int = 0
    active: int = 0
    refused: int = 0  # the service did not accept the relay's connection
    bytes_in: int = 0  # client to service
    bytes_out: int = 0
    turns: int = 0


@dataclass
class Settings:
    default: Rule = field(default_factory=Rule)
    rules: list[Rule] = field(default_factory=list)
    generation: int = 0

    def rule_for(self, port: int, peer: str) -> Rule:
        for rule in self.rules:
            if rule.matches(port, peer):
                return rule
        return self.default


class Direction:
    """One direction of one relayed connection: chunks held in order, then written."""

    def __init__(self, connection: "Connection", name: str) -> None:
        self.connection = connection
        self.name = name
        self.queue: collections.deque = collections.deque()  # (due, chunk or EOF)
        self.held = 0
        self.last_due = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.source: asyncio.Transport | None = None
        self.sink: asyncio.Transport | None = None
        self.source_paused = False
        self.sink_full = False  # the sink's own buffer is past its high-water mark

    def push(self, item) -> None:
        loop = self.connection.loop
        due = max(loop.time() + self.connection.hold(), self.last_due)
        self.last_due = due
        self.queue.append((due, item))
        if item is not EOF:
            self.held += len(item)
            if self.held > HIGH_WATER and not self.source_paused and self.source is not None:
                self.source_paused = True
                self.source.pause_reading()
        if self.timer is None and not self.sink_full and self.sink is not None:
            self.timer = loop.call_at(due, self.flush)

    def flush(self) -> None:
        self.timer = None
        if self.sink is None or self.sink.is_closing():
            return
        loop = self.connection.loop
        now = loop.time()
        while self.queue and self.queue[0][0] <= now and not self.sink_full:
            _due, item = self.queue.popleft()
            if item is EOF:
                self.connection.pass_eof(self)
                if self.connection.closed:
                    return
                continue
            self.held -= len(item)
            self.sink.write(item)
        if self.source_paused and self.held < LOW_WATER and self.source is not None:
            self.source_paused = False
            self.source.resume_reading()
        if self.queue and not self.sink_full:
            self.timer = loop.call_at(self.queue[0][0], self.flush)

    def sink_paused(self) -> None:
        self.sink_full = True
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None

    def sink_resumed(self) -> None:
        self.sink_full = False
        if self.timer is None and self.queue:
            self.timer = self.connection.loop.call_at(max(self.queue[0][0], self.connection.loop.time()), self.flush)

    def drop(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queue.clear()


class Connection:
    """A client's connection to a listener, and the relay's own to the service behind it."""

    def __init__(self, relay: "Relay", listener_port: int, peer: str) -> None:
        self.relay = relay
        self.loop = relay.loop
        self.port = listener_port
        self.peer = peer
        self.counters = relay.counters_for(listener_port, peer)
        self.inbound = Direction(self, "in")  # client -> service
        self.outbound = Direction(self, "out")  # service -> client
        self.client: asyncio.Transport | None = None
        self.service: asyncio.Transport | None = None
        self.eofs = 0
        self.last_was_in = False
        self.closed = False
        self.generation = -1
        self.rule = relay.settings.default

    def hold(self) -> float:
        if self.generation != self.relay.settings.generation:
            self.rule = self.relay.settings.rule_for(self.port, self.peer)
            self.generation = self.relay.settings.generation
        return self.rule.hold(self.relay.rng)

    def from_client(self, data: bytes) -> None:
        self.counters.bytes_in += len(data)
        if not self.last_was_in:
            self.counters.turns += 1
            self.last_was_in = True
        self.inbound.push(data)

    def from_service(self, data: bytes) -> None:
        self.counters.bytes_out += len(data)
        self.last_was_in = False
        self.outbound.push(data)

    def pass_eof(self, direction: Direction) -> None:
        sink = direction.sink
        if sink is not None and not sink.is_closing() and sink.can_write_eof():
            try:
                sink.write_eof()
            except OSError:  # that side is gone already (reset): so is the connection
                self.close(reset=True)
                return
        self.eofs += 1
        if self.eofs == 2:
            self.close()

    def lost(self, side: str, error: Exception | None) -> None:
        """One side is gone. Its end of stream reaches the other after the data before it; a
        reset (``error``) is passed on as one, after the same delay."""
        if self.closed:
            return
        direction = self.inbound if side == "client" else self.outbound
        if error is None:
            direction.push(EOF)
            return
        due = max(self.loop.time() + self.hold(), direction.last_due)
        self.loop.call_at(due, self.abort)

    def abort(self) -> None:
        self.close(reset=True)

    def close(self, reset: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.counters.active -= 1
        self.inbound.drop()
        self.outbound.drop()
        for transport in (self.client, self.service):
            if transport is not None and not transport.is_closing():
                if reset:
                    transport.abort()
                else:
                    transport.close()


class ClientSide(asyncio.Protocol):
    def __init__(self, relay: "Relay", port: int, target: tuple[str, int]) -> None:
        self.relay, self.port, self.target = relay, port, target
        self.connection: Connection | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        peer = transport.get_extra_info("peername")[0]
        self.connection = connection = Connection(self.relay, self.port, peer)
        connection.client = transport
        connection.counters.connections += 1
        connection.counters.active += 1
        connection.inbound.source = transport
        connection.outbound.sink = transport
        # Nothing is read from the client until the service has accepted; what it sends
        # meanwhile waits in the kernel, as on a connection not yet accepted.
        transport.pause_reading()
        self.relay.loop.create_task(self.connect(connection))

    async def connect(self, connection: Connection) -> None:
        try:
            service, _ = await self.relay.loop.create_connection(
                lambda: ServiceSide(connection), self.target[0], self.target[1]
            )
        except OSError:
            connection.counters.refused += 1
            connection.close(reset=True)
            return
        if connection.closed:
            service.close()
            return
        connection.service = service
        connection.inbound.sink = service
        connection.outbound.source = service
        if connection.inbound.queue:
            connection.inbound.sink_resumed()
        connection.client.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.connection.from_client(data)

    def eof_received(self) -> bool:
        self.connection.lost("client", None)
        return True  # half-closed: the answer may still come back

    def connection_lost(self, error: Exception | None) -> None:
        if error is not None:
            self.connection.lost("client", error)

    def pause_writing(self) -> None:
        self.connection.outbound.sink_paused()

    def resume_writing(self) -> None:
        self.connection.outbound.sink_resumed()


class ServiceSide(asyncio.Protocol):
    def __init__(self, connection: Connection) -> None:
        self.connection = connection

    def data_received(self, data: bytes) -> None:
        self.connection.from_service(data)

    def eof_received(self) -> bool:
        self.connection.lost("service", None)
        return True

    def connection_lost(self, error: Exception | None) -> None:
        if error is not None:
            self.connection.lost("service", error)

    def pause_writing(self) -> None:
        self.connection.inbound.sink_paused()

    def resume_writing(self) -> None:
        self.connection.inbound.sink_resumed()


class Relay:
    def __init__(self, loop: asyncio.AbstractEventLoop, settings: Settings, seed: int | None = None) -> None:
        self.loop = loop
        self.settings = settings
        self.rng = random.Random(seed)
        self.counters: dict[tuple[int, str], Counters] = {}
        self.listeners: list[tuple[str, int, str, int]] = []  # listen host, port, target host, port

    def counters_for(self, port: int, peer: str) -> Counters:
        return self.counters.setdefault((port, peer), Counters())

    async def listen(self, host: str, port: int, target: tuple[str, int]) -> tuple[str, int]:
        placeholder = [0]
        server = await self.loop.create_server(
            lambda: ClientSide(self, placeholder[0], target), host, port, reuse_address=True, backlog=512
        )
        bound = server.sockets[0].getsockname()[:2]
        placeholder[0] = bound[1]
        self.listeners.append((bound[0], bound[1], target[0], target[1]))
        return bound

    def configure(self, request: dict) -> None:
        if "default" in request:
            self.settings.default = Rule(**{**asdict(self.settings.default), **request["default"]})
        if "rules" in request:
            self.settings.rules = [Rule(**rule) for rule in request["rules"]]
        self.settings.generation += 1

    def stats(self) -> dict:
        return {
            "listeners": [
                {"listen": f"{host}:{port}", "target": f"{target}:{target_port}"}
                for host, port, target, target_port in self.listeners
            ],
            "default": asdict(self.settings.default),
            "rules": [asdict(rule) for rule in self.settings.rules],
            "counters": [
                {"port": port, "peer": peer, **asdict(c)} for (port, peer), c in sorted(self.counters.items())
            ],
        }

    def answer(self, line: bytes) -> dict:
        """One control request: ``{"default": {...}}`` and/or ``{"rules": [...]}`` change the
        rules; every request (``{}`` too) is answered with the statistics."""
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("not an object")
            self.configure(request)
            return {"ok": True, **self.stats()}
        except (ValueError, TypeError) as error:
            return {"ok": False, "error": str(error)}


class Control(asyncio.Protocol):
    """The control socket: one JSON object per line, each answered with one line."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.buffer = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\n" in self.buffer:
            line, self.buffer = self.buffer.split(b"\n", 1)
            self.transport.write(json.dumps(self.relay.answer(line)).encode() + b"\n")


def fine_timers() -> None:
    """Timers of this process expire on time rather than up to 50 µs late (Linux's default
    timer slack, which lets the kernel batch wake-ups): a tenth of the default delay."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the default slack
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)


def parse_listen(spec: str) -> tuple[str, int, str, int]:
    listen, _, target = spec.partition("=")
    host, _, port = listen.rpartition(":")
    target_host, _, target_port = target.rpartition(":")
    if not (host and port and target_host and target_port):
        raise argparse.ArgumentTypeError(f"--listen takes HOST:PORT=TARGET_HOST:TARGET_PORT, not {spec!r}")
    return host, int(port), target_host, int(target_port)


async def serve(args: argparse.Namespace) -> None:
    loop = asyncio.get_running_loop()
    default = Rule(
        delay_ms=args.delay_ms,
        jitter_ms=args.jitter_ms,
        stall_probability=args.stall_probability,
        stall_max_ms=args.stall_max_ms,
    )
    relay = Relay(loop, Settings(default=default), seed=args.seed)
    bound = []
    for host, port, target_host, target_port in args.listen:
        bound_host, bound_port = await relay.listen(host, port, (target_host, target_port))
        bound.append(f"{bound_host}:{bound_port}")
    if args.control:
        if os.path.exists(args.control):
            os.unlink(args.control)
        await loop.create_unix_server(lambda: Control(relay), path=args.control)
    # The first line says where it listens (a port 0 was chosen by the kernel): a starter
    # waits for it.
    print(json.dumps({"listening": bound, "pid": os.getpid()}), flush=True)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listen", action="append", type=parse_listen, required=True)
    parser.add_argument("--delay-ms", type=float, default=0.25)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--stall-probability", type=float, default=0.0)
    parser.add_argument("--stall-max-ms", type=float, default=0.0)
    parser.add_argument("--control", help="a UNIX socket path for rules and statistics")
    parser.add_argument("--seed", type=int)
    args = parser.parse_args(argv)
    fine_timers()
    runner = asyncio.Runner(loop_factory=lambda: asyncio.SelectorEventLoop(FineEpollSelector()))
    with runner:
        runner.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
