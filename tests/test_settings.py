import os
import subprocess
import sys
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import connection
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
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)

    def test_the_asgi_entry_point_refuses_too(self) -> None:
        environment = {key: value for key, value in os.environ.items() if key not in {"SECRET_KEY", "DJANGO_DEBUG"}}
        result = subprocess.run(
            [sys.executable, "-c", "import codex_site.asgi"],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(result.returncode, 1)
        self.assertEqual(
            result.stderr.strip().splitlines()[-1][:50], "Agent Codex refuses to start: SECRET_KEY is not se"
        )
        self.assertNotIn("Traceback", result.stderr)

    def test_importing_settings_writes_nothing_and_never_exits(self) -> None:
        with tempfile.TemporaryDirectory() as parent:
            var = Path(parent) / "var"
            for debug in ["0", "1"]:
                with self.subTest(debug=debug):
                    result = subprocess.run(
                        [sys.executable, "-c", "import codex_site.settings as s; print(repr(s.SECRET_KEY))"],
                        cwd=ROOT,
                        env={"PATH": os.environ.get("PATH", ""), "CODEX_VAR_DIR": str(var), "DJANGO_DEBUG": debug},
                        capture_output=True,
                        text=True,
                        timeout=60,
                    )
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertEqual(result.stdout.strip(), "''")
                    self.assertFalse(var.exists())

    def test_a_debug_start_reads_the_local_key_made_by_make_run(self) -> None:
        with tempfile.TemporaryDirectory() as var:
            (Path(var) / "dev-secret-key").write_text("local-" + "k" * 50 + "\n")
            result = subprocess.run(
                [sys.executable, "-c", "import codex_site.settings as s; print(s.SECRET_KEY)"],
                cwd=ROOT,
                env={"PATH": os.environ.get("PATH", ""), "CODEX_VAR_DIR": var, "DJANGO_DEBUG": "1"},
                capture_output=True,
                text=True,
                timeout=60,
            )
            self.assertEqual(result.stdout.strip(), "local-" + "k" * 50)

    def test_static_files_live_under_the_var_directory_unless_an_image_puts_them_elsewhere(self) -> None:
        program = "import codex_site.settings as s; print(s.STATIC_ROOT)"
        for extra, expected in [({}, "/srv/var/static"), ({"CODEX_STATIC_ROOT": "/opt/static"}, "/opt/static")]:
            with self.subTest(extra=extra):
                result = subprocess.run(
                    [sys.executable, "-c", program],
                    cwd=ROOT,
                    env={"PATH": os.environ.get("PATH", ""), "CODEX_VAR_DIR": "/srv/var", **extra},
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                self.assertEqual(result.stdout.strip(), expected, result.stderr)

    def test_settings_do_not_look_at_the_command_line(self) -> None:
        source = (ROOT / "codex_site" / "settings.py").read_text()
        self.assertNotIn("sys.argv", source)
        self.assertNotIn("TESTING", source)

    def test_the_test_runner_configures_the_tests(self) -> None:
        self.assertEqual(settings.PASSWORD_HASHERS, ["django.contrib.auth.hashers.MD5PasswordHasher"])
        self.assertTrue(settings.SECRET_KEY)
        self.assertTrue(settings.CODEX_CIMD_ALLOW_LOOPBACK)
        self.assertEqual(connection.settings_dict["CONN_MAX_AGE"], 0)
        self.assertEqual(settings.LOGGING["loggers"]["django.request"]["level"], "ERROR")

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
