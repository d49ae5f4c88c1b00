"""Hosted MCP clients, emulated from their public documentation, over real HTTP.

ChatGPT names itself with a Client ID Metadata Document that declares ``private_key_jwt``, RS256
and a ``jwks_uri``, and authenticates at the token endpoint with RFC 7523 client assertions
signed by the key behind that set. ``ChatGPTLike`` serves such a document and key set over
HTTPS on 127.0.0.1 (a self-signed certificate: loopback documents are fetched without checking
it in development and tests only) and signs assertions as that client does.
"""

import base64
import hashlib
import hmac
import json
import secrets
import time
from typing import Any

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from tests.loopback_http import DocumentsServer
from tests.oauth_helpers import REDIRECT_URI

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_jwk(key: Any, kid: str, alg: str) -> dict[str, Any]:
    algorithm = jwt.get_algorithm_by_name(alg)
    jwk = algorithm.to_jwk(key.public_key(), as_dict=True)
    return {**jwk, "kid": kid, "alg": alg, "use": "sig"}


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encoded_json(value: Any) -> str:
    return b64url(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


class ChatGPTLike:
    """A client with ChatGPT's metadata document, key set and assertions.

    Its document and key set are served by ``server``; ``assertion`` signs a client assertion
    for an audience, with the document's key unless told otherwise."""

    def __init__(self, server: DocumentsServer, *, connector: str = "g-0a1b2c") -> None:
        self.server = server
        self.key: Any = rsa_key()
        self.alg = "RS256"
        self.kid = "chatgpt-" + secrets.token_hex(4)
        self.client_id = f"{server.origin}/oauth/{connector}/client.json"
        self.jwks_uri = f"{server.origin}/oauth/jwks.json"
        self.document: dict[str, Any] = {
            "client_id": self.client_id,
            "client_name": "ChatGPT",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "private_key_jwt",
            "token_endpoint_auth_methods_supported": ["none", "private_key_jwt"],
            "token_endpoint_auth_signing_alg": "RS256",
            "jwks_uri": self.jwks_uri,
        }
        self.publish()

    def publish(self, *extra_keys: dict[str, Any]) -> None:
        self.server.documents[f"/oauth/{self.client_id.rsplit('/oauth/', 1)[1]}"] = self.document
        self.server.documents["/oauth/jwks.json"] = {"keys": [public_jwk(self.key, self.kid, self.alg), *extra_keys]}

    @property
    def jwks_requests(self) -> int:
        return self.server.fetched.get("/oauth/jwks.json", 0)

    def claims(self, audience: str, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": audience,
            "iat": now,
            "exp": now + 60,
            "jti": secrets.token_urlsafe(16),
        }
        claims.update(changes)
        return {name: value for name, value in claims.items() if value is not None}

    def assertion(self, audience: str, *, key: Any = None, kid: str | None = None, **changes: Any) -> str:
        headers = {"kid": kid or self.kid}
        return jwt.encode(self.claims(audience, **changes), key or self.key, algorithm=self.alg, headers=headers)

    def hmac_with_public_key(self, audience: str) -> str:
        """An HS256 'assertion' keyed with the published public key (the algorithm-confusion attack)."""
        secret = self.key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        header = b64url(json.dumps({"alg": "HS256", "typ": "JWT", "kid": self.kid}).encode())
        payload = b64url(json.dumps(self.claims(audience)).encode())
        signature = hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest()
        return f"{header}.{payload}.{b64url(signature)}"

    def signed_raw(self, header: dict[str, Any], claims: dict[str, Any]) -> str:
        """Any claims, JSON-encoded as given and RS256-signed with the client's key (PyJWT's
        encode refuses some of the shapes a hostile test wants to send)."""
        signing_input = f"{encoded_json(header)}.{encoded_json(claims)}"
        signature = jwt.get_algorithm_by_name("RS256").sign(signing_input.encode(), self.key)
        return f"{signing_input}.{b64url(signature)}"

    def unsigned(self, audience: str) -> str:
        header = b64url(json.dumps({"alg": "none", "typ": "JWT", "kid": self.kid}).encode())
        return f"{header}.{b64url(json.dumps(self.claims(audience)).encode())}."

    def token_request(self, base_url: str, data: dict[str, str], assertion: str | None) -> httpx2.Response:
        body = dict(data, client_id=self.client_id)
        if assertion is not None:
            body.update(client_assertion_type=ASSERTION_TYPE, client_assertion=assertion)
        return httpx2.post(base_url + "/o/token/", data=body, timeout=30)
