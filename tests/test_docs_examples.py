"""Every example in README.md and docs/ runs as written, in order, against a live server.

A fenced block preceded by ``<!-- example: run -->`` is run; one preceded by
``<!-- example: output -->`` is what the python block before it prints; ``sketch`` and
``not run (…)`` mark blocks that are not meant to run, and every console, shell or python
block must carry one of these marks, so no example escapes the test.

The test does what the documents tell a reader: it runs the commands in a shell in the
checkout, in order (so ``TOKEN`` carries over), with the local account ``codex`` that
``make run`` creates, against a server whose address replaces ``127.0.0.1:8000`` (as
``make run PORT=…`` would). Console blocks hold ``$ `` commands (indented lines continue
them) and their expected output; ``…`` in expected output stands for any text.
"""

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from tests.live import LiveServerTestCase

DOCUMENTS = ["README.md", "docs/connection.md"]
MARK = re.compile(r"<!-- example: (run|output|sketch|not run \([^)]*\)) -->")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
RUNNABLE_LANGUAGES = {"console", "sh", "bash", "shell", "python", "py"}
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


def document_steps(text: str) -> list[tuple[str, list[str] | None]]:
    """Shell snippets to run in order, each with its expected output (None: not checked)."""
    steps: list[tuple[str, list[str] | None]] = []
    for mark, language, body in blocks(text):
        if mark == "run" and language == "console":
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


class DocumentedExamplesTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.make_user("codex")  # what `make run` creates on its first run
        self.port = self.live.port

    def as_a_reader_would(self, text: str) -> str:
        return re.sub(r"\b(127\.0\.0\.1|localhost):8000\b", rf"\g<1>:{self.port}", text)

    def environment(self) -> dict[str, str]:
        """The shell of a reader in the checkout; the database is the one the live server uses."""
        env = dict(os.environ, CODEX_PUBLIC_URL=self.live.base_url, SECRET_KEY="docs-examples-" + "k" * 40)
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

    def run_in_order(self, document: str) -> None:
        steps = document_steps(self.as_a_reader_would((Path(settings.BASE_DIR) / document).read_text()))
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
                actual = [line for line in output.splitlines() if line.strip()]
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
