import io
import tempfile
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import TestCase, override_settings


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
            self.assertIn("npx @modelcontextprotocol/inspector", text)
            self.assertIn('"mcpServers"', text)
            self.assertIn("/codex/", text)
