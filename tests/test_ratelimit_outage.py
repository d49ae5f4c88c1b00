"""The rate limits when their counters cannot be written. Django's database cache fails writes
silently (``add`` answers False on any database error), so a window's first flush could find no
counter and no way to make one (found by deploy/try_network.sh: during a partition, a get
answered ``internal``). The ``default`` cache (``common.durable_cache``) raises instead: it is the
database failing, so the call answers ``unavailable``, as for any other outage."""

from django.core.cache import cache
from django.db import OperationalError, connection
from django.test import override_settings

from common import ratelimit
from tests.base import GrantTestCase
from tests.clocks import one_rate_window

TRIGGERS = {
    "sqlite": [
        "CREATE TRIGGER codex_cache_refuses BEFORE INSERT ON codex_cache "
        "BEGIN SELECT RAISE(ABORT, 'the database refuses writes'); END",
    ],
    "postgresql": [
        "CREATE FUNCTION codex_cache_refuses() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN RAISE EXCEPTION 'the database refuses writes'; END $$",
        "CREATE TRIGGER codex_cache_refuses BEFORE INSERT ON codex_cache "
        "FOR EACH ROW EXECUTE FUNCTION codex_cache_refuses()",
    ],
}
DROP = {
    "sqlite": ["DROP TRIGGER IF EXISTS codex_cache_refuses"],
    "postgresql": [
        "DROP TRIGGER IF EXISTS codex_cache_refuses ON codex_cache",
        "DROP FUNCTION IF EXISTS codex_cache_refuses()",
    ],
}


class CounterNotWrittenTest(GrantTestCase):
    def setUp(self) -> None:
        super().setUp()
        cache.clear()
        ratelimit._windows.clear()
        self.addCleanup(ratelimit._windows.clear)

    def refuse_cache_writes(self) -> None:
        with connection.cursor() as cursor:
            for statement in TRIGGERS[connection.vendor]:
                cursor.execute(statement)
        self.addCleanup(self.allow_cache_writes)

    def allow_cache_writes(self) -> None:
        with connection.cursor() as cursor:
            for statement in DROP[connection.vendor]:
                cursor.execute(statement)

    def test_the_default_cache_raises_when_a_write_fails(self) -> None:
        self.refuse_cache_writes()
        with self.assertRaisesMessage(OperationalError, "could not be written"):
            cache.add("ratelimit:probe", 1, timeout=60)
        with self.assertRaisesMessage(OperationalError, "could not be written"):
            cache.set("ratelimit:probe", 1, timeout=60)
        self.assertIsNone(cache.get("ratelimit:probe"))

    def test_a_counter_that_cannot_be_written_is_a_database_outage(self) -> None:
        self.refuse_cache_writes()
        with one_rate_window(), self.assertRaisesMessage(OperationalError, "could not be written"):
            ratelimit.allow_batched("tool-calls", "probe", limit=1, window_seconds=60)

    @override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1)  # a batch of one: every call writes the counter
    def test_the_tool_call_answers_unavailable(self) -> None:
        self.refuse_cache_writes()
        with one_rate_window(), self.assertLogs("mcp_endpoint", "WARNING"):
            error = self.call_error("field_notes_search", {})
        self.assertEqual(error["code"], "unavailable")
