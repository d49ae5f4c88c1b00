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
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

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
    serves https takes ``arguments`` after the usual three, and says so with ``scheme``)."""

    def __init__(
        self,
        clients: list[dict[str, Any]],
        *,
        script: str = "provider.mjs",
        scheme: str = "http",
        arguments: tuple[str, ...] = (),
    ) -> None:
        self.clients = clients
        self.script = script
        self.arguments = arguments
        self.port = free_port()
        self.issuer = f"{scheme}://127.0.0.1:{self.port}"
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
