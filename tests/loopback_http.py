"""Small HTTP(S) servers on a free 127.0.0.1 port, served from a thread while used as a
context manager: any handler, and JSON documents by path over HTTPS with a self-signed
certificate (clients' metadata documents and key sets; loopback documents are fetched without
checking the certificate in development and tests only)."""

import contextlib
import datetime as dt
import ipaddress
import json
import socket
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


class LoopbackHTTPServer:
    """Starts serving on ``__enter__``; shuts down and closes on ``__exit__``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Any:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class DocumentsServer(LoopbackHTTPServer):
    """Serves JSON documents by path over HTTPS on 127.0.0.1, counting the requests for each. A
    document given as bytes is served as they are (a hostile server's answer).

    A path in ``drips`` is served as a hostile server serves it: its headers (``"headers"``) or
    its body (``"body"``) one byte every ``DRIP_SECONDS``, for as long as the client listens
    (until the server stops). ``dripping`` counts the answers being dripped at this moment. A
    path given to ``hold`` is answered as a slow but working server answers it: once the test
    lets it go."""

    DRIP_SECONDS = 0.5

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.drips: dict[str, str] = {}
        self.cache_control = "max-age=600"
        self.fetched: dict[str, int] = {}  # requests per path
        self.dripping = 0
        self.held: dict[str, tuple[threading.Event, threading.Event]] = {}  # path: (arrived, let go)
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with outer._lock:
                    outer.fetched[self.path] = outer.fetched.get(self.path, 0) + 1
                if self.path in outer.drips:
                    outer._drip(self, outer.drips[self.path])
                    return
                if self.path in outer.held:
                    arrived, let_go = outer.held[self.path]
                    arrived.set()
                    let_go.wait()
                if self.path not in outer.documents:
                    self.send_error(404)
                    return
                served = outer.documents[self.path]
                body = served if isinstance(served, bytes) else json.dumps(served).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", outer.cache_control)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)
        self._tmp = tempfile.TemporaryDirectory()
        cert, key = self_signed(Path(self._tmp.name))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.origin = f"https://127.0.0.1:{self.port}"

    def hold(self, path: str) -> tuple[threading.Event, threading.Event]:
        """Hold the answer for ``path`` (a document in ``documents``): the first event is set when
        a request for it arrives, and the answer goes once the test sets the second."""
        self.held[path] = (threading.Event(), threading.Event())
        return self.held[path]

    def _drip(self, handler: BaseHTTPRequestHandler, part: str) -> None:
        with self._lock:
            self.dripping += 1
        try:
            if part == "headers":
                handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
                pending = b"X-Slow: " + b"a" * 60_000 + b"\r\n\r\n{}"
            else:
                handler.send_response(200)
                handler.send_header("Content-Type", "application/json")
                handler.send_header("Content-Length", "100000")
                handler.end_headers()
                pending = b" " * 100_000
            handler.wfile.flush()
            for byte in pending:
                if self._stopped.wait(self.DRIP_SECONDS):
                    break
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
        except OSError:
            pass  # the client hung up: what a deadline does
        finally:
            handler.close_connection = True
            with self._lock:
                self.dripping -= 1

    def __exit__(self, *exc: Any) -> None:
        self._stopped.set()
        for _, let_go in self.held.values():
            let_go.set()
        super().__exit__(*exc)
        self._tmp.cleanup()


class StallingListener:
    """A TCP listener on 127.0.0.1 that accepts every connection and never sends a byte: a TLS
    handshake with it waits forever, as one with a hostile document server does. ``accepted``
    counts the connections it holds; ``wait_for(n)`` returns once it has accepted ``n`` (never a
    timed sleep: a condition the accepting thread signals). Every connection is closed on
    ``__exit__``, which ends the handshakes still waiting."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self.socket.getsockname()[1]
        self.origin = f"https://127.0.0.1:{self.port}"
        self.accepted = 0
        self._held: list[socket.socket] = []
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return  # the listener was closed
            with self._changed:
                self._held.append(connection)
                self.accepted += 1
                self._changed.notify_all()

    def wait_for(self, count: int, *, timeout: float = 60) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.accepted >= count, timeout=timeout):
                raise AssertionError(f"only {self.accepted} of {count} connections arrived")

    def __enter__(self) -> "StallingListener":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (a close alone may not)
        self.socket.close()
        with self._changed:
            for connection in self._held:
                connection.close()
        self._thread.join(timeout=10)


def self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path
