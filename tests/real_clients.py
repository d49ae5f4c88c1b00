"""Real MCP clients of pinned releases, installed once into var/clients/ and run as their
users run them: the Python SDK of the 2025-03-26 era in a virtual environment of its own, and
releases of the TypeScript SDK from npm, each driven by a script in tests/clients/.

A missing npm skips the TypeScript clients, unless CODEX_REQUIRE_NODE=1 (which .ci/run sets)
makes that a failure. Each is installed once (``tests.served.install_once``).
"""

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings

from tests.served import install_once, missing

CLIENTS = Path(settings.BASE_DIR) / "tests" / "clients"
INSTALLED = Path(settings.BASE_DIR) / "var" / "clients"

PYTHON_SDK_OLD = "1.9.4"  # protocol 2025-03-26 (each pinned with what it needs in tests/clients/)
PYTHON_SDK_1 = "1.30.0"  # the last 1.x release: 2025-11-25
TS_SDK_OLD = "1.12.3"  # the last 1.x release that speaks only 2025-03-26
TS_SDK = "1.32.2"
TS_CLIENT = "2.4.0"  # @modelcontextprotocol/client, the SDK's 2.x client package
TIMEOUT_SECONDS = 180


def python_sdk(version: str = PYTHON_SDK_OLD) -> Path:
    """The interpreter of a virtual environment holding the Python SDK ``version``."""
    requirements = CLIENTS / f"python-mcp-{version}.txt"

    def install(directory: Path) -> None:
        subprocess.run([sys.executable, "-m", "venv", str(directory)], check=True, capture_output=True, timeout=300)
        subprocess.run(
            [str(directory / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "-r", str(requirements)],
            check=True,
            capture_output=True,
            timeout=600,
        )

    # A venv still works once moved when its interpreter is run directly (only the shebangs of
    # its scripts name the place it was made in, and none of them is used).
    return install_once(INSTALLED / f"python-mcp-{version}", install) / "bin" / "python"


def node_package(package: str, version: str) -> Path:
    """A directory where ``node`` finds ``package`` at ``version`` (and the client scripts)."""
    npm = shutil.which("npm")
    if npm is None:
        missing("the TypeScript clients need npm (apt-get install nodejs npm)", required_by="CODEX_REQUIRE_NODE")

    def install(directory: Path) -> None:
        manifest = {"private": True, "type": "module", "dependencies": {package: version}}
        (directory / "package.json").write_text(json.dumps(manifest))
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=directory,
            check=True,
            capture_output=True,
            timeout=600,
        )

    return install_once(INSTALLED / f"{package.replace('@', '').replace('/', '-')}-{version}", install)


def run_python_client(url: str, token: str, version: str = PYTHON_SDK_OLD) -> dict[str, Any]:
    finished = subprocess.run(
        [str(python_sdk(version)), str(CLIENTS / "python_sdk_client.py"), url, token],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )
    if finished.returncode != 0:
        raise AssertionError(f"the Python SDK {version} client failed:\n{finished.stderr[-4000:]}")
    return json.loads(finished.stdout.strip().splitlines()[-1])


class TypeScriptClient:
    """tests/clients/ts_sdk_client.mjs on one release, as a process the test talks to."""

    def __init__(self, package: str, version: str) -> None:
        self.directory = node_package(package, version)
        self.script = self.directory / "ts_sdk_client.mjs"
        shutil.copyfile(CLIENTS / "ts_sdk_client.mjs", self.script)  # node resolves from the script's place
        self.env = dict(os.environ, MCP_CLIENT_PACKAGE="client" if package.endswith("/client") else "sdk")

    def run(self, url: str, mode: str, argument: str, authorize: Callable[[str], str] | None = None) -> dict:
        """Run the client; in an OAuth mode ``authorize`` plays the person: it is given the
        authorization URL the client printed and returns the query string the redirect URI got."""
        process = subprocess.Popen(
            ["node", str(self.script), url, mode, argument],
            cwd=self.directory,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        watchdog = threading.Timer(TIMEOUT_SECONDS, process.kill)  # a client that hangs is a failure
        watchdog.start()
        try:
            assert process.stdout is not None and process.stdin is not None
            for line in process.stdout:
                if line.startswith("AUTHORIZE ") and authorize is not None:
                    process.stdin.write(authorize(line.removeprefix("AUTHORIZE ").strip()) + "\n")
                    process.stdin.flush()
                elif line.startswith("{"):
                    process.wait(timeout=60)
                    return json.loads(line)
            process.wait(timeout=60)
            raise AssertionError(f"the client printed no result:\n{process.stderr.read()[-4000:]}")
        finally:
            watchdog.cancel()
            if process.poll() is None:
                process.kill()
                process.wait()
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream is not None:
                    stream.close()
