"""A SQLite database named by DATABASE_URL gets the same WAL, IMMEDIATE and busy-timeout
options as the default one, so concurrent writers queue instead of losing writes."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from django.test import SimpleTestCase

ROOT = Path(__file__).resolve().parent.parent

WRITERS = """
import json, threading
from django.contrib.auth import get_user_model
from django.db import connections
from notebook import services
from notebook.validation import parse_entry_input

codex = services.codex_for_user(user=get_user_model().objects.create_user("writer"))
barrier = threading.Barrier(8)
failures = []

def write(worker):
    barrier.wait()
    for n in range(6):
        try:
            services.entry_save(codex=codex, request_id=f"{worker}-{n}", data=parse_entry_input({"content": "x"}))
        except Exception as error:
            failures.append(type(error).__name__ + ": " + str(error))
    connections.close_all()

threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
codex.refresh_from_db()
print(json.dumps({"failures": failures[:3], "failed": len(failures), "entries": codex.entries.count(),
                  "options": connections["default"].settings_dict["OPTIONS"]}))
"""


class SqliteDatabaseUrlTest(SimpleTestCase):
    def test_concurrent_writers_on_a_database_url_sqlite_lose_nothing(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            env = {key: value for key, value in os.environ.items() if key != "DJANGO_DEBUG"}
            env.update(
                SECRET_KEY="sqlite-url-test-" + "k" * 40,
                DATABASE_URL=f"sqlite:///{tmp}/codex.sqlite3",
                CODEX_VAR_DIR=tmp,
                CODEX_LOG_LEVEL="ERROR",
            )

            def manage(*args: str) -> str:
                result = subprocess.run(
                    [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
                )
                self.assertEqual(result.returncode, 0, result.stderr[-2000:])
                return result.stdout

            manage("migrate", "--noinput")
            report = json.loads(manage("shell", "-c", WRITERS).strip().splitlines()[-1])
        self.assertEqual(report["options"]["transaction_mode"], "IMMEDIATE")
        self.assertEqual((report["failed"], report["entries"]), (0, 48), report["failures"])
