"""Every example in README.md and docs/ runs as written, in order, against a live server.

A fenced block preceded by ``<!-- example: run -->`` is run; ``<!-- example: run (needs npx) -->``
too, where Node.js's ``npx`` is installed (``CODEX_REQUIRE_NODE=1``, set by ``.ci/run``, makes
a missing ``npx`` a failure instead of a skip); one preceded by ``<!-- example: output -->`` is
what the python block before it prints; ``<!-- example: client config -->`` marks a JSON
client configuration, which is connected to as a client would (below); ``sketch`` and
``not run (…)`` mark blocks that are not meant to run, and every console, shell or python
block must carry one of these marks, so no example escapes the test.

The test does what the documents tell a reader: it runs the commands in a shell in the
checkout, in order (so ``TOKEN`` carries over), with the local account ``codex`` that
``make run`` creates, against a server whose address replaces ``127.0.0.1:8000`` (as
``make run PORT=…`` would). The shell is a reader's: nothing in it says where the server
runs (no ``CODEX_PUBLIC_URL``), so a command that needs the address must say it. Console
blocks hold ``$ `` commands (indented lines continue them) and their expected output; ``…``
in expected output stands for any text; npm's own warnings (``npm warn …``, which depend on
the local Node.js version) are not part of the expected output.
"""

import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any
from unittest import SkipTest
from urllib.parse import quote

import httpx2
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from tests.live import LiveServerTestCase

DOCUMENTS = ["README.md", "docs/connection.md"]
NEEDS_NPX = "run (needs npx)"
CLIENT_CONFIG = "client config"
MARK = re.compile(r"<!-- example: (run \(needs npx\)|run|output|client config|sketch|not run \([^)]*\)) -->")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUNNABLE_LANGUAGES = {"console", "sh", "bash", "shell", "python", "py"}
NPM_WARNING = re.compile(r"^npm warn ", re.IGNORECASE)
HEREDOC_END = "CODEX_EXAMPLE_EOF"


def blocks(text: str) -> list[tuple[str | None, str, str]]:
    """(mark, language, body) for each fenced block, the mark taken from the line before it."""
    found = []
    for fence in FENCE.finditer(text):
        before = text[: fence.start()].rstrip().splitlines()
        mark = MARK.fullmatch(before[-1].strip()) if before else None
        found.append((mark.group(1) if mark else None, fence.group(1), fence.group(2)))
    return found


def console_steps(body: str) -> list[tuple[str, list[str]]]:
    """The commands of a console block, each with the output lines shown after it."""
    steps: list[tuple[str, list[str]]] = []
    continuing = False
    for line in body.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
            continuing = True
        elif continuing and line[:1].isspace():
            steps[-1] = (steps[-1][0] + "\n" + line, steps[-1][1])
        else:
            continuing = False
            if line.strip():
                steps[-1][1].append(line)
    return steps


def npx_available() -> bool:
    """Whether ``npx`` runs here; without it, its examples skip unless CODEX_REQUIRE_NODE=1."""
    if shutil.which("npx"):
        return True
    if os.environ.get("CODEX_REQUIRE_NODE") == "1":
        raise RuntimeError("the README's client examples need npx (apt-get install nodejs npm)")
    return False


def document_steps(text: str, *, with_npx: bool = True) -> list[tuple[str, list[str] | None]]:
    """Shell snippets to run in order, each with its expected output (None: not checked)."""
    steps: list[tuple[str, list[str] | None]] = []
    for mark, language, body in blocks(text):
        if (mark == NEEDS_NPX and language == "console" and with_npx) or (mark == "run" and language == "console"):
            steps.extend(console_steps(body))
        elif mark == "run" and language in {"python", "py"}:
            steps.append((f".venv/bin/python - <<'{HEREDOC_END}'\n{body}{HEREDOC_END}", None))
        elif mark == "output":
            assert steps and steps[-1][1] is None, "an output block must follow a python block"
            steps[-1] = (steps[-1][0], [line for line in body.splitlines() if line.strip()])
    return steps


def matches(expected: str, actual: str) -> bool:
    pattern = ".*".join(re.escape(part) for part in expected.rstrip().split("…"))
    return re.fullmatch(pattern, actual.rstrip()) is not None


class ReaderShell:
    """The shell of a reader in the checkout, beside the live server ``self.live``."""

    live: Any

    def environment(self) -> dict[str, str]:
        """The shell of a reader in the checkout; the database is the one the live server uses."""
        env = dict(os.environ, SECRET_KEY="docs-examples-" + "k" * 40)
        env.pop("CODEX_PUBLIC_URL", None)  # a reader's shell does not know the server's address
        db = connection.settings_dict
        if db["ENGINE"].endswith("sqlite3"):
            env.pop("DATABASE_URL", None)
            env["CODEX_SQLITE_PATH"] = str(db["NAME"])
        else:
            credentials = quote(db["USER"] or "", safe="") + (
                ":" + quote(db["PASSWORD"], safe="") if db["PASSWORD"] else ""
            )
            host = quote(db["HOST"] or "localhost", safe="")
            env["DATABASE_URL"] = f"postgres://{credentials}@{host}:{db['PORT'] or 5432}/{db['NAME']}"
        return env


class DocumentedExamplesTest(ReaderShell, LiveServerTestCase):
    def setUp(self) -> None:
        self.make_user("codex")  # what `make run` creates on its first run
        self.port = self.live.port

    def as_a_reader_would(self, text: str) -> str:
        return re.sub(r"\b(127\.0\.0\.1|localhost):8000\b", rf"\g<1>:{self.port}", text)

    def run_in_order(self, document: str) -> None:
        text = self.as_a_reader_would((Path(settings.BASE_DIR) / document).read_text())
        steps = document_steps(text, with_npx=npx_available())
        self.assertTrue(steps, f"{document} has no runnable example")
        script = []
        for number, (command, _) in enumerate(steps):
            script.append(f"printf '\\n@@step {number}\\n'\n{{ {command}\n}} 2>&1\nprintf '\\n@@rc %s\\n' $?")
        finished = subprocess.run(
            ["bash", "--noprofile", "--norc"],
            input="\n".join(script) + "\n",
            capture_output=True,
            text=True,
            cwd=settings.BASE_DIR,
            env=self.environment(),
            timeout=300,
        )
        outputs = re.findall(r"@@step (\d+)\n(.*?)\n@@rc (\d+)\n", finished.stdout, re.DOTALL)
        self.assertEqual(len(outputs), len(steps), finished.stdout + finished.stderr)
        for (command, expected), (_, output, status) in zip(steps, outputs, strict=True):
            with self.subTest(document=document, command=command.splitlines()[0][:80]):
                self.assertEqual(status, "0", output)
                if expected is None:
                    continue
                actual = [line for line in output.splitlines() if line.strip() and not NPM_WARNING.match(line)]
                self.assertEqual(len(actual), len(expected), output)
                for want, got in zip(expected, actual, strict=True):
                    self.assertTrue(matches(want, got), f"expected {want!r}\n     got {got!r}")

    def test_every_console_and_python_block_is_marked(self) -> None:
        for document in [
            *DOCUMENTS,
            *(str(path.relative_to(settings.BASE_DIR)) for path in Path(settings.BASE_DIR, "docs").glob("*.md")),
        ]:
            for mark, language, body in blocks((Path(settings.BASE_DIR) / document).read_text()):
                if language in RUNNABLE_LANGUAGES:
                    with self.subTest(document=document, block=body.splitlines()[0][:60]):
                        self.assertIsNotNone(mark, "mark it <!-- example: run -->, sketch or not run (why)")

    def test_the_readme_and_connection_examples_run_in_order_as_written(self) -> None:
        for document in DOCUMENTS:
            self.run_in_order(document)

    def test_each_client_configuration_connects_as_its_client_would(self) -> None:
        """A URL entry (a desktop client over Streamable HTTP) gets the 401 that starts OAuth
        discovery, and then serves tools with a token; a command entry (``mcp-remote`` for a
        stdio-only client) is started as the client would start it, and lists the tools. The
        OAuth sign-in itself is the SDK flow's test; here a token stands in for it."""
        configs = [
            json.loads(body)
            for mark, language, body in blocks(
                self.as_a_reader_would((Path(settings.BASE_DIR) / "README.md").read_text())
            )
            if mark == CLIENT_CONFIG
        ]
        servers = [server for config in configs for server in config["mcpServers"].values()]
        self.assertEqual(sorted("url" in server for server in servers), [False, True], servers)
        token = self.token_for(get_user_model().objects.get(username="codex"))
        expected = ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"]
        for server in servers:
            with self.subTest(server=server):
                if "url" in server:
                    self.assertEqual(server["url"], self.mcp_url)
                    challenge = httpx2.post(server["url"], json={})
                    self.assertEqual(challenge.status_code, 401)
                    self.assertIn("resource_metadata=", challenge.headers["www-authenticate"])
                    self.assertEqual(self.tool_names_over_http(server["url"], token), expected)
                else:
                    if not npx_available():
                        raise SkipTest("npx is not installed (apt-get install nodejs npm)")
                    self.assertEqual(server["command"], "npx")
                    self.assertIn(self.mcp_url, server["args"])
                    self.assertEqual(self.tool_names_over_stdio(server, token), expected)

    @staticmethod
    def tool_names_over_http(url: str, token: str) -> list[str]:
        from tests.mcp_client import with_client

        async def names(client) -> list[str]:
            return [tool.name for tool in (await client.list_tools()).tools]

        return with_client(url, token, "auto", names)

    @staticmethod
    def tool_names_over_stdio(server: dict, token: str) -> list[str]:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters, stdio_client

        # mcp-remote would open a browser for the OAuth sign-in; its --header sends a token instead.
        parameters = StdioServerParameters(
            command=server["command"], args=[*server["args"], "--header", f"Authorization: Bearer {token}"]
        )

        async def names(log) -> list[str]:
            async with Client(stdio_client(parameters, errlog=log), mode="legacy") as client:
                return [tool.name for tool in (await client.list_tools()).tools]

        # mcp-remote narrates on stderr; kept out of the test output unless the call fails.
        with tempfile.TemporaryFile("w+") as log:
            try:
                return asyncio.run(asyncio.wait_for(names(log), timeout=180))
            except Exception as error:
                log.seek(0)
                raise AssertionError(f"mcp-remote failed ({error!r}); its stderr:\n{log.read()[-4000:]}") from error
