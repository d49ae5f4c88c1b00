"""PostgreSQL connections: the health check that costs no round trip on a quiet connection
(``codex_site.postgresql``) still replaces a connection the server ended, and Django's pool
(``CODEX_DB_POOL_SIZE``) gets its connection back after every call, a failed one too."""

import json
import os
import select
import subprocess
import sys
import unittest
from pathlib import Path
from unittest import mock

from django.db import connection, connections
from django.test import SimpleTestCase, TestCase

from notebook.sql import driver

ROOT = Path(__file__).resolve().parent.parent
BACKEND_PID = "SELECT pg_backend_pid()"


def wait_until_readable(raw, seconds: float = 30) -> None:
    """Until the server's goodbye (its FATAL message, the end of the stream) has reached the
    client's socket: an event waited for, not a pause."""
    poller = select.poll()
    poller.register(raw.pgconn.socket, select.POLLIN)
    if not poller.poll(seconds * 1000):
        raise AssertionError("the server did not end the connection")


@unittest.skipUnless(connection.vendor == "postgresql", "PostgreSQL's connections")
class SessionSettingsTest(SimpleTestCase):
    """Every session runs without parallel query (``codex_site.postgresql.SESSION_SETTINGS``):
    a connection Django opens, and one its pool opens."""

    def parallel_workers(self, **settings) -> str:
        wrapper = type(connections["default"])({**connection.settings_dict, **settings}, alias="settings_probe")
        try:
            return driver.run(wrapper, "SHOW max_parallel_workers_per_gather", [], driver.fetchone)[0]
        finally:
            wrapper.close()
            wrapper.close_pool()

    def test_a_new_connection_has_no_parallel_workers(self) -> None:
        self.assertEqual(self.parallel_workers(), "0")

    def test_a_pooled_connection_has_no_parallel_workers(self) -> None:
        options = {**connection.settings_dict["OPTIONS"], "pool": {"min_size": 1, "max_size": 1}}
        self.assertEqual(self.parallel_workers(OPTIONS=options, CONN_MAX_AGE=0), "0")


@unittest.skipUnless(connection.vendor == "postgresql", "PostgreSQL's connections")
class HealthCheckTest(TestCase):
    """A second connection to the test database, persistent as in production (the test runner
    makes the tests' own connections non-persistent), checked as each tool call checks it."""

    def setUp(self) -> None:
        settings = {**connection.settings_dict, "CONN_MAX_AGE": 60, "CONN_HEALTH_CHECKS": True}
        self.persistent = type(connections["default"])(settings, alias="health_check_probe")
        self.addCleanup(self.persistent.close)
        self.persistent.ensure_connection()

    def next_call(self) -> None:
        """What the boundary does between two tool calls (``close_old_connections``)."""
        self.persistent.close_if_unusable_or_obsolete()

    def pid(self) -> int:
        return driver.run(self.persistent, BACKEND_PID, [], driver.fetchone)[0]

    def test_a_quiet_connection_is_reused_without_a_round_trip(self) -> None:
        first = self.pid()
        self.next_call()
        with mock.patch.object(self.persistent, "is_usable", side_effect=AssertionError("SELECT 1 sent")):
            self.assertEqual(self.pid(), first)

    def test_a_connection_the_server_ended_is_replaced_at_the_next_call(self) -> None:
        first = self.pid()
        self.next_call()
        with connection.cursor() as cursor:  # as a failover or a restart ends every session
            cursor.execute("SELECT pg_terminate_backend(%s, 30000)", [first])  # returns once it is gone
        wait_until_readable(self.persistent.connection)
        second = self.pid()
        self.assertNotEqual(second, first)

    def test_a_connection_in_a_transaction_gets_djangos_own_check(self) -> None:
        # Only an idle connection can be judged by its socket; anything else is asked.
        self.persistent.connection.execute("BEGIN")
        self.persistent.health_check_done = False
        with mock.patch.object(self.persistent, "is_usable", return_value=True) as asked:
            self.persistent.close_if_health_check_failed()
        asked.assert_called_once()
        self.persistent.connection.execute("ROLLBACK")


POOLED_CALLS = """
import asyncio, json, os
import django
django.setup()
import psycopg
from django.db import DatabaseError, connection
from mcp_endpoint.boundary import run_sync
from notebook.sql.driver import fetchone, run


def pid():
    return run(connection, "SELECT pg_backend_pid()", [], fetchone)[0]


def fails():
    run(connection, "SELECT no_such_column", [], fetchone)


async def main():
    answers = {"first": await run_sync(pid)}
    try:
        await run_sync(fails)
    except DatabaseError as error:
        answers["failed"] = type(error).__name__
    # A pool of one: this call gets a connection only if the failed one was given back.
    answers["after_failure"] = await run_sync(pid)
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as other:
        # As a failover or a restart ends every session; returns once the backend is gone.
        other.execute("SELECT pg_terminate_backend(%s, 30000)", [answers["first"]])
    answers["after_termination"] = await run_sync(pid)
    stats = connection.pool.get_stats()
    answers["available"] = stats["pool_available"]
    print(json.dumps(answers))


asyncio.run(main())
"""


@unittest.skipUnless(connection.vendor == "postgresql", "Django's pool is PostgreSQL's")
class PoolTest(SimpleTestCase):
    """Tool calls through the real boundary in a fresh process whose settings make a pool of one."""

    def test_a_pool_of_one_gets_its_connection_back_after_a_failure_and_replaces_a_broken_one(self) -> None:
        environment = {
            **os.environ,
            "CODEX_DB_POOL_SIZE": "1",
            "DJANGO_SETTINGS_MODULE": "codex_site.settings",
        }
        result = subprocess.run(
            [sys.executable, "-c", POOLED_CALLS], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
        )
        self.assertEqual(result.returncode, 0, result.stderr)
        answers = json.loads(result.stdout)
        self.assertEqual(answers["failed"], "ProgrammingError")
        self.assertEqual(answers["after_failure"], answers["first"])  # the same connection, given back
        self.assertNotEqual(answers["after_termination"], answers["first"])  # checked, and replaced
        self.assertEqual(answers["available"], 1)
