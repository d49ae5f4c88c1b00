"""The official SDK's OAuthClientProvider, wired to a test Browser that signs in and consents."""

import asyncio
import datetime as dt
import ipaddress
import json
import ssl
import tempfile
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.loopback_http import LoopbackHTTPServer
from tests.oauth_helpers import REDIRECT_URI, Browser


class MemoryStorage:
    """The SDK's TokenStorage protocol, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class ConsentingUser:
    """Plays the person: the SDK hands it the authorization URL; it signs in, presses Allow,
    and hands the redirect's code, state and iss back to the SDK."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.redirect: dict[str, str] | None = None
        self.authorization_urls: list[str] = []

    async def redirect_handler(self, url: str) -> None:
        self.authorization_urls.append(url)
        # The browser is synchronous; the server runs on its own thread and loop.
        self.redirect = await asyncio.to_thread(self.browser.authorize, url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.redirect is not None and "code" in self.redirect, self.redirect
        return AuthorizationCodeResult(
            code=self.redirect["code"], state=self.redirect.get("state"), iss=self.redirect.get("iss")
        )


def client_metadata(scope: str | None = None) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        redirect_uris=[REDIRECT_URI],
        client_name="SDK test agent",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope=scope,
    )


class LoopbackMetadataServer(LoopbackHTTPServer):
    """Serves one Client ID Metadata Document over HTTPS on 127.0.0.1 (self-signed certificate)."""

    def __init__(self) -> None:
        self.document: dict[str, Any] = {}
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests += 1
                body = json.dumps(outer.document).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Cache-Control", "max-age=600")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)
        self._tmp = tempfile.TemporaryDirectory()
        cert, key = _self_signed(Path(self._tmp.name))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.port}/oauth/client-metadata.json"

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._tmp.cleanup()


def _self_signed(directory: Path) -> tuple[Path, Path]:
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
