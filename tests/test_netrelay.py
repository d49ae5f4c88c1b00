"""deploy/netrelay.py, the delaying TCP relay deploy/try_network.sh puts on every path: run as
the script runs it (a process of its own), on 127.0.0.1, in front of an echo server.

Only lower bounds of time are asserted (a chunk is never passed on before its delay): a busy
machine can make the relay later, never earlier."""

import contextlib
import json
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from django.test import SimpleTestCase

from tests import deploy_scripts

ROOT = Path(__file__).resolve().parent.parent
RELAY = ROOT / "deploy" / "netrelay.py"


class EchoServer:
    """Echoes each connection's bytes back; answers an end of stream with its own after the
    echo. ``reply_after_eof`` is sent after the client's end of stream (a half-closed reply)."""

    def __init__(self, reply_after_eof: bytes = b"") -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.reply_after_eof = reply_after_eof
        self.peers: list[str] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, address = self.socket.accept()
            except OSError:
                return
            self.peers.append(address[0])
            threading.Thread(target=self._echo, args=(connection,), daemon=True).start()

    def _echo(self, connection: socket.socket) -> None:
        with connection:
            while data := connection.recv(65536):
                connection.sendall(data)
            connection.sendall(self.reply_after_eof)
            connection.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.socket.close()


class RelayProcess:
    def __init__(self, target_port: int, control: Path, *options: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                str(RELAY),
                "--listen",
                f"127.0.0.1:0=127.0.0.1:{target_port}",
                "--control",
                str(control),
                *options,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.control_path = control
        first = json.loads(self.process.stdout.readline())
        host, _, port = first["listening"][0].rpartition(":")
        self.address = (host, int(port))

    def connect(self) -> socket.socket:
        client = socket.create_connection(self.address, timeout=30)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return client

    def control(self, request: dict) -> dict:
        with socket.socket(socket.AF_UNIX) as control:
            control.settimeout(30)
            control.connect(str(self.control_path))
            control.sendall(json.dumps(request).encode() + b"\n")
            return json.loads(control.makefile().readline())

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.process.stdout.close()


def receive_exactly(client: socket.socket, size: int) -> bytes:
    chunks = []
    while size:
        chunk = client.recv(min(size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


class NetRelayTest(SimpleTestCase):
    def start(self, *options: str, reply_after_eof: bytes = b"") -> tuple[RelayProcess, EchoServer]:
        directory = Path(tempfile.mkdtemp(prefix="codex-relay-"))
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        echo = EchoServer(reply_after_eof)
        self.addCleanup(echo.close)
        relay = RelayProcess(echo.port, directory / "control.sock", *options)
        self.addCleanup(relay.stop)
        return relay, echo

    def test_every_byte_comes_back_in_order_through_a_slow_reader(self) -> None:
        relay, _ = self.start("--delay-ms", "1")
        payload = random.Random(36).randbytes(12 * 1024 * 1024)  # more than the relay holds
        with relay.connect() as client:

            def send() -> None:
                client.sendall(payload)
                client.shutdown(socket.SHUT_WR)

            sender = threading.Thread(target=send)
            sender.start()
            received = bytearray()
            while chunk := client.recv(7919):
                received += chunk
                if len(received) < 2 * 1024 * 1024:
                    time.sleep(0.0005)  # slow at first: the relay must stop reading, not drop
            sender.join(timeout=60)
        self.assertEqual(len(received), len(payload))
        self.assertEqual(bytes(received), payload)

    def test_a_round_trip_takes_at_least_the_delay_each_way(self) -> None:
        relay, _ = self.start("--delay-ms", "20")
        with relay.connect() as client:
            for number in range(5):
                started = time.monotonic()
                client.sendall(b"ping %d" % number)
                self.assertEqual(receive_exactly(client, 6), b"ping %d" % number)
                self.assertGreaterEqual(time.monotonic() - started, 0.040)

    def test_each_request_and_answer_is_one_turn(self) -> None:
        relay, echo = self.start("--delay-ms", "0")
        with relay.connect() as client:
            for number in range(7):
                client.sendall(b"request %d" % number)
                receive_exactly(client, 9)
        counters = relay.control({})["counters"]
        self.assertEqual([(c["peer"], c["connections"], c["turns"]) for c in counters], [("127.0.0.1", 1, 7)])
        self.assertEqual(counters[0]["bytes_in"], 7 * 9)
        self.assertEqual(echo.peers, ["127.0.0.1"])

    def test_a_half_closed_connection_still_gets_its_answer_then_the_end(self) -> None:
        relay, _ = self.start("--delay-ms", "5", reply_after_eof=b" and goodbye")
        with relay.connect() as client:
            client.sendall(b"hello")
            client.shutdown(socket.SHUT_WR)
            received = b""
            while chunk := client.recv(100):
                received += chunk
        self.assertEqual(received, b"hello and goodbye")

    def test_a_service_that_refuses_closes_the_client_and_is_counted(self) -> None:
        unused = socket.create_server(("127.0.0.1", 0))
        port = unused.getsockname()[1]
        unused.close()
        directory = Path(tempfile.mkdtemp(prefix="codex-relay-"))
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        relay = RelayProcess(port, directory / "control.sock")
        self.addCleanup(relay.stop)
        with relay.connect() as client:
            with contextlib.suppress(ConnectionResetError):  # an end of stream or a reset
                self.assertEqual(client.recv(10), b"")
        deadline = time.monotonic() + 30
        while relay.control({})["counters"][0]["refused"] != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(relay.control({})["counters"][0]["refused"], 1)

    def test_rules_set_through_the_control_socket_apply_at_once_to_their_port_and_peers(self) -> None:
        relay, _ = self.start("--delay-ms", "0")
        port = relay.address[1]
        with relay.connect() as client:
            client.sendall(b"fast")
            receive_exactly(client, 4)
            answer = relay.control({"rules": [{"port": port, "peers": ["127.0.0.1"], "delay_ms": 30}]})
            self.assertTrue(answer["ok"])
            self.assertEqual(answer["rules"][0]["delay_ms"], 30)
            started = time.monotonic()
            client.sendall(b"slow")
            receive_exactly(client, 4)
            self.assertGreaterEqual(time.monotonic() - started, 0.060)
        self.assertFalse(relay.control("not an object")["ok"])
        self.assertIn("delay_ms", relay.control({"default": {"delay_ms": 0.5}})["default"])


class RuleTest(SimpleTestCase):
    def test_a_chunk_is_held_for_the_delay_plus_at_most_the_jitter_and_the_stall(self) -> None:
        netrelay = deploy_scripts.load("netrelay")
        rng = random.Random(36)
        rule = netrelay.Rule(delay_ms=0.25, jitter_ms=2, stall_probability=0.5, stall_max_ms=300)
        holds = [rule.hold(rng) for _ in range(2000)]
        self.assertGreaterEqual(min(holds), 0.00025)
        self.assertLessEqual(max(holds), (0.25 + 2 + 300) / 1000)
        stalled = [hold for hold in holds if hold > (0.25 + 2) / 1000]
        self.assertGreater(len(stalled), 800)  # about half, drawn from a fixed seed
        self.assertLess(len(stalled), 1200)
        self.assertEqual({netrelay.Rule().hold(rng) for _ in range(10)}, {0.00025})

    def test_the_first_matching_rule_wins_then_the_default(self) -> None:
        netrelay = deploy_scripts.load("netrelay")
        settings = netrelay.Settings(
            default=netrelay.Rule(delay_ms=1),
            rules=[netrelay.Rule(port=5432, peers=["198.18.36.21"], delay_ms=2), netrelay.Rule(port=5432, delay_ms=3)],
        )
        self.assertEqual(settings.rule_for(5432, "198.18.36.21").delay_ms, 2)
        self.assertEqual(settings.rule_for(5432, "198.18.36.32").delay_ms, 3)
        self.assertEqual(settings.rule_for(8008, "198.18.36.21").delay_ms, 1)
