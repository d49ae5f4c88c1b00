import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings
from django.test import SimpleTestCase

ROOT = Path(__file__).resolve().parent.parent


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key not in {"SECRET_KEY", "DJANGO_DEBUG"}}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


class SettingsTest(SimpleTestCase):
    def test_a_production_start_without_secret_key_refuses_with_a_clear_message(self) -> None:
        result = manage("check")
        self.assertEqual(result.returncode, 1)
        self.assertIn("refuses to start: SECRET_KEY is not set", result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_a_production_start_with_secret_key_runs(self) -> None:
        result = manage("check", SECRET_KEY="a-real-secret-" + "x" * 40)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_a_public_url_with_a_path_is_refused(self) -> None:
        result = manage("check", SECRET_KEY="s" * 50, CODEX_PUBLIC_URL="https://example.com/codex")
        self.assertEqual(result.returncode, 1)
        self.assertIn("refuses to start: CODEX_PUBLIC_URL must be an origin", result.stderr)
        self.assertNotIn("Traceback", result.stderr)

    def test_sqlite_waits_for_writers_instead_of_failing(self) -> None:
        if settings.DATABASES["default"]["ENGINE"] != "django.db.backends.sqlite3":
            self.skipTest("SQLite settings")
        options = settings.DATABASES["default"]["OPTIONS"]
        self.assertEqual(options["transaction_mode"], "IMMEDIATE")
        self.assertGreaterEqual(options["timeout"], 5)
        self.assertIn("journal_mode=WAL", options["init_command"])
