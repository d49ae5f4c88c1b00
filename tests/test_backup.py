"""codex_backup under a write load, codex_restore into a fresh database, and a server on the
restored database that signs a person in and answers the four tools (both databases)."""

import datetime as dt
import io
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import psycopg
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import close_old_connections, connection
from django.test import SimpleTestCase, TransactionTestCase, override_settings

from authserver.core.tokens import mint_access_token
from codex_site import backup
from codex_site.database_url import database_settings
from codex_site.settings import public_url_settings
from notebook import services
from notebook.validation import parse_entry_input
from tests.live import BOTH_SCOPES
from tests.mcp_client import success_of, with_client
from tests.oauth_helpers import Browser, authorization_url, exchange_code, pkce_pair, register_client
from tests.server_process import ROOT, SERVER_HASHERS, ServerProcess, database_environment, server_environment

WRITERS = 2
# Bounds the load whatever the machine's speed: the writers stop at the backup's end or here.
MOST_WRITES_PER_WRITER = 3_000
WRITES_BEFORE_BACKUP = 40


class WriteLoad:
    """Writer threads saving entries through the service, each acknowledgement recorded."""

    def __init__(self, codex) -> None:
        self.codex = codex
        self.acknowledged: list[uuid.UUID] = []
        self.lock = threading.Lock()
        self.enough = threading.Event()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._write, args=(n,)) for n in range(WRITERS)]

    def _write(self, writer: int) -> None:
        try:
            for n in range(MOST_WRITES_PER_WRITER):
                if self.stop.is_set():
                    break
                data = parse_entry_input({"content": f"load {writer}-{n}", "tags": ["load"]})
                entry = services.entry_save(codex=self.codex, request_id=f"load-{writer}-{n}", data=data)
                with self.lock:  # returned: committed and on disk
                    self.acknowledged.append(entry.id)
                    if len(self.acknowledged) >= WRITES_BEFORE_BACKUP:
                        self.enough.set()
        except BaseException as error:
            self.errors.append(error)
            self.enough.set()
        finally:
            close_old_connections()
            connection.close()

    def __enter__(self) -> "WriteLoad":
        for thread in self.threads:
            thread.start()
        self.enough.wait(timeout=120)
        return self

    def so_far(self) -> list[uuid.UUID]:
        with self.lock:
            return list(self.acknowledged)

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join()


def manage(*args: str, environ: dict[str, str], var_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=server_environment("http://127.0.0.1:9", var_dir, environ),
        capture_output=True,
        text=True,
        timeout=300,
    )


class BackupAndRestoreTests(TransactionTestCase):
    def setUp(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="codex-backup-"))
        self.addCleanup(shutil.rmtree, self.directory, ignore_errors=True)
        self.restored_database: str | None = None

    def tearDown(self) -> None:
        if self.restored_database is not None:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{self.restored_database}" WITH (FORCE)')

    def _fresh_database(self) -> dict[str, str]:
        """An empty database for the restore: a new file, or a new PostgreSQL database."""
        if connection.vendor == "sqlite":
            return database_environment(str(self.directory / "restored.sqlite3"))
        self.restored_database = f"{connection.settings_dict['NAME']}_restored"
        with connection.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{self.restored_database}" WITH (FORCE)')
            cursor.execute(f'CREATE DATABASE "{self.restored_database}"')
        return database_environment(self.restored_database)

    def _restored_entry_ids(self, environ: dict[str, str]) -> set[uuid.UUID]:
        if connection.vendor == "sqlite":
            with sqlite3.connect(environ["CODEX_SQLITE_PATH"]) as restored:
                return {uuid.UUID(row[0]) for row in restored.execute("SELECT id FROM notebook_entry")}
        with psycopg.connect(environ["DATABASE_URL"]) as restored:
            return {row[0] for row in restored.execute("SELECT id FROM notebook_entry")}

    def _assert_sound(self, environ: dict[str, str]) -> None:
        """integrity_check and the FTS5 index's own check on SQLite; amcheck on every B-tree
        index on PostgreSQL; and on both, the kept counters and revisions agree with the rows."""
        consistency = [
            "SELECT count(*) FROM notebook_codex c WHERE c.entry_count <> "
            "(SELECT count(*) FROM notebook_entry e WHERE e.codex_id = c.id)",
            "SELECT count(*) FROM notebook_entry e WHERE NOT EXISTS (SELECT 1 FROM notebook_entryrevision r "
            "WHERE r.entry_id = e.id AND r.revision = e.revision)",
        ]
        if connection.vendor == "sqlite":
            with sqlite3.connect(environ["CODEX_SQLITE_PATH"]) as restored:
                self.assertEqual(restored.execute("PRAGMA integrity_check").fetchall(), [("ok",)])
                restored.execute(
                    "INSERT INTO notebook_entry_trigram(notebook_entry_trigram) VALUES ('integrity-check')"
                )
                for query in consistency:
                    self.assertEqual(restored.execute(query).fetchone()[0], 0, query)
            return
        with psycopg.connect(environ["DATABASE_URL"], autocommit=True) as restored:
            restored.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
            indexes = restored.execute(
                "SELECT c.oid::regclass FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am a ON a.oid = c.relam JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE a.amname = 'btree' AND n.nspname = 'public'"
            ).fetchall()
            self.assertGreater(len(indexes), 10)
            for (index,) in indexes:
                restored.execute("SELECT bt_index_check(%s::regclass, true)", [str(index)])
            for query in consistency:
                self.assertEqual(restored.execute(query).fetchone()[0], 0, query)

    def test_a_backup_under_write_load_restores_every_acknowledged_write_and_serves_them(self) -> None:
        with override_settings(PASSWORD_HASHERS=SERVER_HASHERS):
            alice = get_user_model().objects.create_user("alice", password="alice-password")
        codex = services.codex_for_user(user=alice)
        kept = services.entry_save(
            codex=codex, request_id="kept", data=parse_entry_input({"content": "the kept note", "tags": ["kept"]})
        )
        server = ServerProcess(self.directory, {})
        with override_settings(**public_url_settings(server.base_url)):
            old_token = mint_access_token(user=alice, scopes=BOTH_SCOPES, lifetime=dt.timedelta(hours=1))

        archive = self.directory / "codex.backup"
        with WriteLoad(codex) as load:
            acknowledged = load.so_far()
            call_command("codex_backup", str(archive), stdout=io.StringIO())
        self.assertEqual(load.errors, [])
        self.assertGreaterEqual(len(acknowledged), WRITES_BEFORE_BACKUP)

        environ = self._fresh_database()
        restored = manage("codex_restore", str(archive), environ=environ, var_dir=self.directory)
        self.assertEqual(restored.returncode, 0, restored.stderr)
        self.assertTrue(set(acknowledged) | {kept.id} <= self._restored_entry_ids(environ))
        self._assert_sound(environ)
        # Again over the restored database: refused, then replaced with --force (--clean).
        self.assertNotEqual(
            manage("codex_restore", str(archive), environ=environ, var_dir=self.directory).returncode, 0
        )
        again = manage("codex_restore", "--force", str(archive), environ=environ, var_dir=self.directory)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertTrue(set(acknowledged) | {kept.id} <= self._restored_entry_ids(environ))

        server.extra = environ
        server.start()
        try:
            self._assert_serves(server.base_url, old_token, kept.id)
        finally:
            server.stop()

    def _assert_serves(self, base_url: str, old_token: str, kept_id: uuid.UUID) -> None:
        # The sign-in: a client registers, alice signs in with her password and allows it.
        client_id = register_client(base_url).json()["client_id"]
        verifier, challenge = pkce_pair()
        browser = Browser(base_url, "alice", "alice-password")
        try:
            url = authorization_url(
                base_url,
                client_id,
                code_challenge=challenge,
                code_challenge_method="S256",
                scope="notes:read notes:write",
            )
            code = browser.authorize(url)["code"]
        finally:
            browser.close()
        token = exchange_code(base_url, client_id, code, verifier).json()["access_token"]

        async def four_tools(client):
            got = success_of(await client.call_tool("field_notes_get", {"id": str(kept_id)}))
            found = success_of(await client.call_tool("field_notes_search", {"query": "KEPT NOTE"}))
            saved = success_of(
                await client.call_tool("field_notes_save", {"requestId": "after", "entry": {"content": "after"}})
            )
            updated = success_of(
                await client.call_tool(
                    "field_notes_update",
                    {"id": saved["entry"]["id"], "expectedRevision": 1, "entry": {"content": "after, again"}},
                )
            )
            return got, found, updated

        got, found, updated = with_client(base_url + "/mcp", token, "auto", four_tools)
        self.assertEqual(got["entry"]["content"], "the kept note")
        self.assertEqual([entry["id"] for entry in found["entries"]], [str(kept_id)])
        self.assertEqual(updated["entry"]["revision"], 2)

        # A token minted before the backup came through it (stored hashed, still valid).
        async def get_kept(client):
            return success_of(await client.call_tool("field_notes_get", {"id": str(kept_id)}))

        self.assertEqual(with_client(base_url + "/mcp", old_token, "legacy", get_kept)["entry"]["id"], str(kept_id))

    def test_restore_refuses_a_database_that_is_not_empty(self) -> None:
        archive = self.directory / "codex.backup"
        call_command("codex_backup", str(archive), stdout=io.StringIO())
        with self.assertRaisesRegex(CommandError, "--force|--clean"):
            call_command("codex_restore", str(archive))

    def test_restore_refuses_a_file_that_is_not_a_backup(self) -> None:
        if connection.vendor != "sqlite":
            self.skipTest("SQLite reads the file itself; pg_restore refuses other files on its own")
        bogus = self.directory / "bogus"
        bogus.write_bytes(b"not a database")
        with self.assertRaisesRegex(CommandError, "not a sound backup|not a database"):
            call_command("codex_restore", str(bogus), force=True)


class PostgresConnectionTests(SimpleTestCase):
    def test_pg_dump_connects_as_the_server_does_to_every_node_and_never_with_the_password_on_its_command_line(
        self,
    ) -> None:
        url = "postgresql://codex:s3cret@10.0.0.1:5432,10.0.0.2:5433/codex?target_session_attrs=read-write"
        # As settings.py makes it: psycopg's prepare_threshold and Django's pool are no libpq keywords.
        config = database_settings(
            url, conn_max_age=0, postgresql_options={"prepare_threshold": 2}, pool={"max_size": 2}
        )
        conninfo = backup.pg_conninfo(config)
        self.assertNotIn("prepare_threshold", conninfo)
        self.assertNotIn("pool", conninfo)
        self.assertIn("host=10.0.0.1,10.0.0.2", conninfo)
        self.assertIn("port=5432,5433", conninfo)
        self.assertIn("target_session_attrs=read-write", conninfo)
        self.assertIn("dbname=codex", conninfo)
        self.assertNotIn("s3cret", conninfo)
        self.assertEqual(backup.pg_environment(config)["PGPASSWORD"], "s3cret")
