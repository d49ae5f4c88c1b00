"""DATABASE_URL in libpq's multi-host form reaches psycopg whole: every host, in order,
and ``target_session_attrs``, so that after a failover a new connection finds the primary."""

import json
import os
import subprocess
import sys
import unittest
from pathlib import Path

import dj_database_url
from django.db import connection
from django.test import SimpleTestCase

from codex_site.database_url import (
    CONNECT_TIMEOUT_SECONDS,
    KEEPALIVE_OPTIONS,
    POSTGRESQL_ENGINE,
    TCP_USER_TIMEOUT_MS,
    DatabaseURLError,
    database_settings,
)

ROOT = Path(__file__).resolve().parent.parent
THREE_NODES = (
    "postgresql://codex:s%40cret@10.0.0.1:5432,10.0.0.2:5433,10.0.0.3:5434/codex"
    "?target_session_attrs=read-write&connect_timeout=2"
)
# Port 1 is privileged and never a PostgreSQL: a connection to it is refused at once.
DEAD_NODE = "127.0.0.1:1"


class DatabaseURLTest(SimpleTestCase):
    def test_dj_database_url_alone_refuses_a_list_of_hosts(self) -> None:
        # The reason codex_site.database_url exists: if this starts passing, it can go.
        with self.assertRaises(dj_database_url.ParseError):
            dj_database_url.parse(THREE_NODES)

    def test_a_list_of_hosts_becomes_libpq_host_and_port_lists(self) -> None:
        database = database_settings(THREE_NODES, conn_max_age=60)
        self.assertEqual(database["ENGINE"], POSTGRESQL_ENGINE)
        self.assertEqual(database["HOST"], "10.0.0.1,10.0.0.2,10.0.0.3")
        self.assertEqual(database["PORT"], "5432,5433,5434")
        self.assertEqual((database["USER"], database["PASSWORD"], database["NAME"]), ("codex", "s@cret", "codex"))
        self.assertEqual(
            database["OPTIONS"],
            {
                "target_session_attrs": "read-write",
                "connect_timeout": 2,
                "tcp_user_timeout": TCP_USER_TIMEOUT_MS,
                **KEEPALIVE_OPTIONS,
            },
        )
        self.assertEqual((database["CONN_MAX_AGE"], database["CONN_HEALTH_CHECKS"]), (60, True))

    def test_hosts_may_be_ipv6_or_omit_their_port(self) -> None:
        database = database_settings("postgres://u@[::1]:5432,db2,db3:6432/codex", conn_max_age=0)
        self.assertEqual(database["HOST"], "::1,db2,db3")
        self.assertEqual(database["PORT"], "5432,,6432")  # an empty item is libpq's default port
        self.assertEqual(database_settings("postgres://u@db1,db2/codex", conn_max_age=0)["PORT"], "")

    def test_a_single_host_is_read_as_dj_database_url_reads_it(self) -> None:
        url = "postgres://codex:pw@db.internal:5432/codex?sslmode=require"
        expected = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
        expected["OPTIONS"]["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
        expected["OPTIONS"]["tcp_user_timeout"] = TCP_USER_TIMEOUT_MS
        expected["OPTIONS"].update(KEEPALIVE_OPTIONS)
        expected["ENGINE"] = POSTGRESQL_ENGINE
        self.assertEqual(database_settings(url, conn_max_age=60), expected)

    def test_postgresql_options_go_under_the_urls_own(self) -> None:
        options = {"prepare_threshold": 2, "connect_timeout": 9}
        database = database_settings(THREE_NODES, conn_max_age=60, postgresql_options=options)
        self.assertEqual(database["OPTIONS"]["prepare_threshold"], 2)
        self.assertEqual(database["OPTIONS"]["connect_timeout"], 2)  # the URL's
        self.assertNotIn(
            "OPTIONS", database_settings("sqlite:////tmp/x.sqlite3", conn_max_age=0, postgresql_options=options)
        )

    def test_a_pool_keeps_the_host_list_and_turns_persistent_connections_off(self) -> None:
        # Django refuses a pool with CONN_MAX_AGE > 0; the pool's connections get the host list.
        database = database_settings(THREE_NODES, conn_max_age=60, pool={"max_size": 4})
        self.assertEqual(database["OPTIONS"]["pool"], {"max_size": 4})
        self.assertEqual(database["CONN_MAX_AGE"], 0)
        self.assertEqual((database["HOST"], database["PORT"]), ("10.0.0.1,10.0.0.2,10.0.0.3", "5432,5433,5434"))
        self.assertEqual(database["OPTIONS"]["target_session_attrs"], "read-write")

    def test_every_postgresql_url_gets_a_connect_timeout_and_its_own_wins(self) -> None:
        self.assertEqual(
            database_settings("postgres://u@db/codex", conn_max_age=0)["OPTIONS"]["connect_timeout"],
            CONNECT_TIMEOUT_SECONDS,
        )
        self.assertEqual(database_settings(THREE_NODES, conn_max_age=0)["OPTIONS"]["connect_timeout"], 2)
        self.assertNotIn("OPTIONS", database_settings("sqlite:////tmp/x.sqlite3", conn_max_age=0))

    def test_every_postgresql_url_bounds_an_unanswered_connection_and_its_own_values_win(self) -> None:
        # A database host that vanished (or a network that loses its answers) acknowledges
        # nothing: without these, a statement waits for TCP to give up, many minutes.
        options = database_settings("postgres://u@db/codex", conn_max_age=0)["OPTIONS"]
        self.assertEqual(options["tcp_user_timeout"], TCP_USER_TIMEOUT_MS)
        self.assertLess(TCP_USER_TIMEOUT_MS, 10_000)  # well inside a client's 30 s
        self.assertEqual(options["keepalives"], 1)
        own = database_settings("postgres://u@db/codex?tcp_user_timeout=20000&keepalives_idle=30", conn_max_age=0)
        self.assertEqual(own["OPTIONS"]["tcp_user_timeout"], 20000)
        self.assertEqual(own["OPTIONS"]["keepalives_idle"], 30)
        self.assertNotIn("OPTIONS", database_settings("sqlite:////tmp/x.sqlite3", conn_max_age=0))

    def test_a_list_of_hosts_for_another_database_or_an_unreadable_host_is_refused(self) -> None:
        with self.assertRaisesMessage(DatabaseURLError, "PostgreSQL only"):
            database_settings("mysql://u:p@db1:3306,db2:3306/codex", conn_max_age=0)
        with self.assertRaisesMessage(DatabaseURLError, "cannot read host 'db2:x'"):
            database_settings("postgres://u:secret@db1,db2:x/codex", conn_max_age=0)
        with self.assertRaises(DatabaseURLError) as caught:
            database_settings("postgres://u:secret@db1,,db3/codex", conn_max_age=0)
        self.assertNotIn("secret", str(caught.exception))


CONNECT = """
import django, json
django.setup()
from django.db import connection
connection.ensure_connection()
with connection.cursor() as cursor:
    cursor.execute("SHOW transaction_read_only")
    read_only = cursor.fetchone()[0]
pooled = connection.pool is not None
# What libpq set on the connection's socket (from the options, on TCP only).
import socket
probe = socket.socket(fileno=__import__("os").dup(connection.connection.pgconn.socket))
tcp = {
    "user_timeout": probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
    "keepalive": probe.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
    "keepalive_idle": probe.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
}
probe.close()
print(json.dumps({"port": connection.connection.info.port, "read_only": read_only, "pooled": pooled, "tcp": tcp}))
"""


@unittest.skipUnless(connection.vendor == "postgresql", "connects to the PostgreSQL the tests run on")
class MultiHostConnectionTest(SimpleTestCase):
    """Through settings.py, Django and psycopg to the real server, in a fresh process."""

    databases = {"default"}
    READ_ONLY_ROLE = "codex_read_only_probe"
    # The defaults (codex_site.database_url), as the kernel holds them for the socket.
    TCP = {"user_timeout": 5000, "keepalive": 1, "keepalive_idle": 10}

    def connect(self, url: str, **variables: str) -> subprocess.CompletedProcess:
        environment = {key: value for key, value in os.environ.items() if key != "CODEX_DB_POOL_SIZE"}
        environment.update(DATABASE_URL=url, DJANGO_SETTINGS_MODULE="codex_site.settings", **variables)
        return subprocess.run(
            [sys.executable, "-c", CONNECT], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
        )

    def url(self, hosts: str, *, user: str | None = None, attrs: str = "read-write") -> str:
        server = connection.settings_dict
        credentials = user or server["USER"]
        if server["PASSWORD"] and not user:
            credentials += ":" + server["PASSWORD"]
        # The database the tests' own URL names (the test database is dropped at the end).
        name = os.environ["DATABASE_URL"].rsplit("/", 1)[1].split("?")[0]
        return f"postgresql://{credentials}@{hosts}/{name}?target_session_attrs={attrs}"

    def server(self) -> str:
        return f"{connection.settings_dict['HOST']}:{connection.settings_dict['PORT']}"

    def test_a_dead_first_host_is_skipped_for_the_next(self) -> None:
        result = self.connect(self.url(f"{DEAD_NODE},{self.server()}"))
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = {"port": int(connection.settings_dict["PORT"]), "read_only": "off", "pooled": False}
        self.assertEqual(json.loads(result.stdout), {**expected, "tcp": self.TCP})

    def test_a_pool_skips_a_dead_first_host_too(self) -> None:
        result = self.connect(self.url(f"{DEAD_NODE},{self.server()}"), CODEX_DB_POOL_SIZE="2")
        self.assertEqual(result.returncode, 0, result.stderr)
        expected = {"port": int(connection.settings_dict["PORT"]), "read_only": "off", "pooled": True}
        self.assertEqual(json.loads(result.stdout), {**expected, "tcp": self.TCP})

    def test_read_write_refuses_a_read_only_session_that_any_accepts(self) -> None:
        # A standby's sessions are read-only; so are this role's, which lets one server show
        # that target_session_attrs reaches libpq.
        with connection.cursor() as cursor:
            cursor.execute(f"DROP ROLE IF EXISTS {self.READ_ONLY_ROLE}")
            cursor.execute(f"CREATE ROLE {self.READ_ONLY_ROLE} LOGIN")
            cursor.execute(f"ALTER ROLE {self.READ_ONLY_ROLE} SET default_transaction_read_only = on")
        self.addCleanup(self.drop_role)
        refused = self.connect(self.url(f"{DEAD_NODE},{self.server()}", user=self.READ_ONLY_ROLE))
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("OperationalError", refused.stderr)
        self.assertIn("read-only", refused.stderr)
        accepted = self.connect(self.url(self.server(), user=self.READ_ONLY_ROLE, attrs="any"))
        self.assertEqual(accepted.returncode, 0, accepted.stderr)
        self.assertEqual(json.loads(accepted.stdout)["read_only"], "on")

    def drop_role(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP ROLE IF EXISTS {self.READ_ONLY_ROLE}")
