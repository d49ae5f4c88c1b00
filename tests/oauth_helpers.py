"""Driving the authorization server the way a browser and a client would, over real HTTP."""

import base64
import hashlib
import secrets
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2

REDIRECT_URI = "http://127.0.0.1:9/callback"  # never contacted: the test reads the Location header


class _Forms(HTMLParser):
    """Collects each form's inputs (name -> value) in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if tag == "form":
            self.forms.append({"action": attributes.get("action"), "fields": {}, "buttons": []})
        elif tag in {"input", "button"} and self.forms:
            name = attributes.get("name")
            if tag == "button" or attributes.get("type") == "submit":
                self.forms[-1]["buttons"].append((name, attributes.get("value")))
            elif name:
                self.forms[-1]["fields"][name] = attributes.get("value") or ""


def forms_of(html: str) -> list[dict[str, Any]]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def query_of(url: str) -> dict[str, str]:
    return {key: values[-1] for key, values in parse_qs(urlsplit(url).query).items()}


def register_client(base_url: str, redirect_uri: str = REDIRECT_URI, **extra: Any) -> httpx2.Response:
    body = {
        "redirect_uris": [redirect_uri],
        "client_name": "Test agent",
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
        **extra,
    }
    return httpx2.post(base_url + "/o/register/", json=body)


class Browser:
    """A person with a browser: signs in and answers the consent page, via the real HTML forms."""

    def __init__(self, base_url: str, username: str, password: str) -> None:
        self.base_url = base_url
        self.username = username
        self.password = password
        self.http = httpx2.Client(follow_redirects=False, timeout=30)

    def close(self) -> None:
        self.http.close()

    def _absolute(self, location: str) -> str:
        return urljoin(self.base_url + "/", location)

    def sign_in_if_asked(self, response: httpx2.Response) -> httpx2.Response:
        """Follow a redirect to the login page, sign in, and come back."""
        if response.status_code != 302 or "/accounts/login/" not in response.headers["location"]:
            return response
        login_url = self._absolute(response.headers["location"])
        page = self.http.get(login_url)
        assert forms_of(page.text), f"{login_url}: {page.status_code} {page.text[:2000]}"
        form = forms_of(page.text)[-1]
        fields = dict(form["fields"], login=self.username, password=self.password)
        signed_in = self.http.post(self._absolute("/accounts/login/"), data=fields)
        assert signed_in.status_code == 302, signed_in.text
        return self.http.get(self._absolute(signed_in.headers["location"]))

    def open_authorization(self, url: str) -> httpx2.Response:
        return self.sign_in_if_asked(self.http.get(url))

    def decide(self, consent_page: httpx2.Response, *, allow: bool) -> httpx2.Response:
        """Press Allow or Deny on the consent page; returns the redirect back to the client."""
        assert consent_page.status_code == 200, consent_page.text
        form = next(
            f
            for f in forms_of(consent_page.text)
            if "csrfmiddlewaretoken" in f["fields"] and "client_id" in f["fields"]
        )
        fields = dict(form["fields"])
        if allow:
            fields["allow"] = "Authorize"
        return self.http.post(str(consent_page.url), data=fields)

    def authorize(self, url: str, *, allow: bool = True) -> dict[str, str]:
        """The whole trip: returns the query parameters the client receives at its redirect URI."""
        response = self.decide(self.open_authorization(url), allow=allow)
        assert response.status_code == 302, response.text
        return query_of(response.headers["location"])


def authorization_url(base_url: str, client_id: str, **params: str) -> str:
    query = {"response_type": "code", "client_id": client_id, "redirect_uri": REDIRECT_URI, "state": "st-1"}
    query.update(params)
    return base_url + "/o/authorize/?" + urlencode(query)


def exchange_code(base_url: str, client_id: str, code: str, verifier: str | None, **extra: str) -> httpx2.Response:
    data = {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "client_id": client_id}
    if verifier is not None:
        data["code_verifier"] = verifier
    data.update(extra)
    return httpx2.post(base_url + "/o/token/", data=data)


def refresh(base_url: str, client_id: str, refresh_token: str, **extra: str) -> httpx2.Response:
    data = {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": client_id, **extra}
    return httpx2.post(base_url + "/o/token/", data=data)
