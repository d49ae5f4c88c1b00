"""A real OpenID Connect provider on loopback for the single sign-on tests: panva's
``oidc-provider`` (npm, OpenID-certified, pinned with its lock file in
``tests/oidc_provider/``), run by Node.js as a second process on an ephemeral port.

It is installed once into ``var/`` with ``npm ci`` by the first test that needs it. Without
Node.js and npm the single sign-on tests skip, unless ``CODEX_REQUIRE_NODE=1`` (CI sets it)
makes that a failure. Node 20.19 or later runs it; with an older ``node`` on the PATH,
``npx -y -p node@22`` brings one.
"""

import json
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from django.conf import settings

from authserver.sso_config import allauth_providers, parse_providers
from tests.served import missing

SOURCE = Path(__file__).resolve().parent / "oidc_provider"
VERSION = json.loads((SOURCE / "package.json").read_text())["dependencies"]["oidc-provider"]


def _prefix() -> Path:
    return Path(settings.BASE_DIR) / "var" / f"oidc-provider-{VERSION}"


def install() -> Path:
    """``var/oidc-provider-<version>/node_modules``, installed from the lock file if missing."""
    prefix = _prefix()
    lock = (SOURCE / "package-lock.json").read_text()
    modules = prefix / "node_modules"
    installed = prefix / "package-lock.json"
    if (modules / "oidc-provider").is_dir() and installed.is_file() and installed.read_text() == lock:
        return modules
    npm = shutil.which("npm")
    if npm is None:
        missing(
            "the single sign-on tests need npm for oidc-provider (apt-get install npm)",
            required_by="CODEX_REQUIRE_NODE",
        )
    prefix.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(SOURCE / name, prefix / name)
    subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=prefix, check=True, capture_output=True, timeout=600)
    return modules


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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class OIDCProvider:
    """One provider process; ``clients`` are its registered clients (oidc-provider's
    client metadata)."""

    def __init__(self, clients: list[dict[str, Any]]) -> None:
        self.clients = clients
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.directory = tempfile.TemporaryDirectory(prefix="codex-oidc-")

    def start(self) -> "OIDCProvider":
        modules = install()
        clients_file = Path(self.directory.name) / "clients.json"
        clients_file.write_text(json.dumps(self.clients))
        self.process = subprocess.Popen(
            [*node_command(), str(SOURCE / "provider.mjs"), str(self.port), str(clients_file), str(modules)],
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
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process is not None and self.process.stdout:
            self.process.stdout.close()
        self.directory.cleanup()


def sso_settings(*providers: dict[str, Any]) -> dict[str, Any]:
    """The settings ``CODEX_OIDC_PROVIDERS`` would make for these providers (for override_settings)."""
    parsed = parse_providers(json.dumps(list(providers)))
    return {"CODEX_SSO_PROVIDERS": parsed, "SOCIALACCOUNT_PROVIDERS": allauth_providers(parsed)}
