"""A real OpenID Connect provider on loopback for the single sign-on tests: panva's
``oidc-provider`` (npm, OpenID-certified, pinned with its lock file in
``tests/oidc_provider/``), run by Node.js as a second process on a port that
``tests.served.free_port`` picks.

It is installed once into ``var/`` with ``npm ci`` by the first test that needs it. Without
Node.js and npm the single sign-on tests skip, unless ``CODEX_REQUIRE_NODE=1`` (CI sets it)
makes that a failure. Node 20.19 or later runs it; with an older ``node`` on the PATH,
``npx -y -p node@22`` brings one.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from django.conf import settings

from authserver.core.sso_config import allauth_providers, parse_providers
from tests.served import free_port, install_once, missing, stop

SOURCE = Path(__file__).resolve().parent / "oidc_provider"
VERSION = json.loads((SOURCE / "package.json").read_text())["dependencies"]["oidc-provider"]


def install() -> Path:
    """``var/oidc-provider-<version>-<lock>/node_modules``, installed from the lock file once
    (``tests.served.install_once``: the SQLite and PostgreSQL runs side by side never see half
    of one). The lock file's digest is in the name, so a changed lock installs anew."""
    lock = (SOURCE / "package-lock.json").read_bytes()
    npm = shutil.which("npm")

    def npm_ci(directory: Path) -> None:
        if npm is None:
            missing(
                "the single sign-on tests need npm for oidc-provider (apt-get install npm)",
                required_by="CODEX_REQUIRE_NODE",
            )
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(SOURCE / name, directory / name)
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"], cwd=directory, check=True, capture_output=True, timeout=600
        )

    digest = hashlib.sha256(lock).hexdigest()[:12]
    target = Path(settings.BASE_DIR) / "var" / f"oidc-provider-{VERSION}-{digest}"
    return install_once(target, npm_ci) / "node_modules"


def node_command() -> list[str]:
    node = shutil.which("node")
    if node is not None:
        answer = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        major, minor = (int(part) for part in answer.lstrip("v").split(".")[:2])
        if (major, minor) >= (20, 19):
            return [node]
    npx = shutil.which("npx")
    if npx is None:
        missing(
            "the single sign-on tests need Node.js 20.19+ or npx (apt-get install nodejs npm)",
            required_by="CODEX_REQUIRE_NODE",
        )
    return [npx, "-y", "-p", "node@22", "node"]


class OIDCProvider:
    """One provider process; ``clients`` are its registered clients (oidc-provider's
    client metadata). ``script`` is the provider's script in ``tests/oidc_provider/`` (one that
    serves https takes ``arguments`` after the usual three, and says so with ``scheme``).
    ``trailing_slash`` makes its issuer end in ``/``, as Auth0's do (the script reads the issuer
    from ``ISSUER``)."""

    def __init__(
        self,
        clients: list[dict[str, Any]],
        *,
        script: str = "provider.mjs",
        scheme: str = "http",
        arguments: tuple[str, ...] = (),
        trailing_slash: bool = False,
    ) -> None:
        self.clients = clients
        self.script = script
        self.arguments = arguments
        self.port = free_port()
        self.issuer = f"{scheme}://127.0.0.1:{self.port}" + ("/" if trailing_slash else "")
        self.process: subprocess.Popen | None = None
        self.directory = tempfile.TemporaryDirectory(prefix="codex-oidc-")

    def start(self) -> "OIDCProvider":
        modules = install()
        clients_file = Path(self.directory.name) / "clients.json"
        clients_file.write_text(json.dumps(self.clients))
        self.process = subprocess.Popen(
            [
                *node_command(),
                str(SOURCE / self.script),
                str(self.port),
                str(clients_file),
                str(modules),
                *self.arguments,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "ISSUER": self.issuer},
        )
        deadline = time.monotonic() + 180  # npx may fetch Node.js first
        while time.monotonic() < deadline:
            line = self.process.stdout.readline() if self.process.stdout else ""
            if line.startswith("listening"):
                return self
            if not line and self.process.poll() is not None:
                break
        self.stop()
        raise RuntimeError(f"oidc-provider did not start: {line!r}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop(self.process, timeout=10)
        if self.process is not None and self.process.stdout:
            self.process.stdout.close()
        self.directory.cleanup()


def sso_settings(*providers: dict[str, Any]) -> dict[str, Any]:
    """The settings ``CODEX_OIDC_PROVIDERS`` would make for these providers (for override_settings)."""
    parsed = parse_providers(json.dumps(list(providers)))
    return {"CODEX_SSO_PROVIDERS": parsed, "SOCIALACCOUNT_PROVIDERS": allauth_providers(parsed)}


def through_provider_pages(http: Any, location: str, login: str, *, until: str) -> str:
    """Follow a provider's redirects from ``location`` (an absolute URL at its authorization
    endpoint), answering
    oidc-provider's development sign-in (as ``login``) and consent pages as they come (a session
    it remembers skips the sign-in), until it sends the browser to an address that starts with
    ``until`` (the client's callback): that address. ``http`` is an httpx2 client."""
    for _ in range(12):
        if location.startswith(until):
            return location
        response = http.get(location)
        if response.status_code == 200:
            action = re.search(r'action="([^"]+)"', response.text).group(1)
            prompt = re.search(r'name="prompt" value="([a-z]+)"', response.text).group(1)
            answer = {"prompt": "login", "login": login, "password": "any"} if prompt == "login" else {"prompt": prompt}
            response = http.post(urljoin(str(response.url), action), data=answer)
        location = urljoin(str(response.url), response.headers["location"])
    raise AssertionError(f"the provider never sent the browser back: {location}")
