"""The official SDK's OAuthClientProvider, wired to a test Browser that signs in and consents."""

import asyncio
from typing import Any

from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.loopback_http import DocumentsServer
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


class LoopbackMetadataServer(DocumentsServer):
    """Serves one Client ID Metadata Document over HTTPS on 127.0.0.1 (self-signed certificate)."""

    PATH = "/oauth/client-metadata.json"

    def __init__(self) -> None:
        super().__init__()
        self.url = self.origin + self.PATH
        self.document = {}

    @property
    def document(self) -> dict[str, Any]:
        return self.documents[self.PATH]

    @document.setter
    def document(self, value: dict[str, Any]) -> None:
        self.documents[self.PATH] = value

    @property
    def requests(self) -> int:
        return self.fetched.get(self.PATH, 0)
