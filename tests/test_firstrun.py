import io
import subprocess
import tempfile
from pathlib import Path
from unittest import SkipTest

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import TestCase, override_settings

from tests.live import LiveServerTestCase
from tests.test_docs_examples import ReaderShell, npx_available


def banner() -> str:
    with tempfile.TemporaryDirectory() as var, override_settings(VAR_DIR=Path(var)):
        out = io.StringIO()
        call_command("codex_firstrun", stdout=out)
    return out.getvalue()


class FirstRunTest(TestCase):
    def test_it_creates_the_local_account_once_and_prints_how_to_connect(self) -> None:
        with tempfile.TemporaryDirectory() as var, override_settings(VAR_DIR=Path(var)):
            first, second = io.StringIO(), io.StringIO()
            call_command("codex_firstrun", stdout=first)
            password = (Path(var) / "local-account.txt").read_text().split("password: ")[1].strip()
            call_command("codex_firstrun", stdout=second)
        user = get_user_model().objects.get(username="codex")
        self.assertTrue(user.check_password(password))
        self.assertEqual(get_user_model().objects.count(), 1)
        self.assertIn(password, first.getvalue())
        self.assertNotIn(password, second.getvalue())
        for text in (first.getvalue(), second.getvalue()):
            self.assertIn("/mcp", text)
            self.assertIn("@modelcontextprotocol/inspector@2.12.0", text)
            self.assertIn("mcp-remote@0.15.1", text)
            self.assertIn('"mcpServers"', text)
            self.assertIn("/codex/", text)

    def test_it_says_the_local_account_is_an_operator_and_how_to_add_people(self) -> None:
        text = banner()
        self.assertTrue(get_user_model().objects.get(username="codex").is_staff)
        self.assertIn("operator (staff and superuser", text)
        self.assertIn("manage.py codex_adduser NAME", text)


class BannerCommandsRunTest(ReaderShell, LiveServerTestCase):
    """The banner's token and Inspector commands work as printed, on whatever port it serves."""

    def test_the_banners_token_and_inspector_commands_list_the_tools(self) -> None:
        if not npx_available():
            raise SkipTest("npx is not installed (apt-get install nodejs npm)")
        lines = [line.strip() for line in banner().splitlines()]
        commands = [line for line in lines if line.startswith("TOKEN=$(")]
        commands += [line for line in lines if "mcp-inspector --cli" in line]
        self.assertEqual(len(commands), 2, lines)
        self.assertIn(f"CODEX_PUBLIC_URL={self.live.base_url} ", commands[0])
        finished = subprocess.run(
            ["bash", "--noprofile", "--norc", "-c", "\n".join(commands)],
            capture_output=True,
            text=True,
            cwd=settings.BASE_DIR,
            env=self.environment(),
            timeout=300,
        )
        self.assertEqual(finished.returncode, 0, finished.stdout + finished.stderr)
        for name in ("field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"):
            self.assertIn(f'"name": "{name}"', finished.stdout)
