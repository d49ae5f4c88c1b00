"""Round trips to PostgreSQL per save and update, counted in libpq's own trace of the
protocol: the server ends its answer to each request with ReadyForQuery, so these count
what the worker waits on (BEGIN and COMMIT included, which Django's query log does not
show). On PostgreSQL a save and an update are one statement each (``notebook.sql.writes``),
sent in autocommit; the token check before them is the tool's own round trip and not
counted here. A get's entry is read in the token check's statement: the whole call is one;
a save's or an update's call is two, the token check and the write."""

import datetime as dt
import unittest
import uuid
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TransactionTestCase, override_settings

from authserver.core.tokens import mint_access_token
from mcp_endpoint import server
from mcp_endpoint.auth import RequestToken, token_checksum
from notebook import services
from notebook.exceptions import Conflict, NotFound, ResourceExhausted
from notebook.models import EntryRelatedAgent, EntryTag
from notebook.validation import parse_entry_input
from tests.base import last_use_already_written
from tests.wire import PREPARATION, exchanges, round_trips, traced


def execute(name: str, arguments: dict[str, Any], checksum: str) -> dict[str, Any]:
    """The tool handler's work in its worker thread, for a request whose token is not yet checked."""
    return server._execute(name, arguments, RequestToken(checksum))


@unittest.skipUnless(
    connection.vendor == "postgresql" and settings.CODEX_FAST_PATH, "the fast path's round trips to a PostgreSQL server"
)
class RoundTripsTest(TransactionTestCase):
    def setUp(self) -> None:
        self.codex = services.codex_for_user(user=get_user_model().objects.create_user("carol"))
        self.entry = self.save("seed", {"content": "seed", "tags": ["a", "b"], "relatedAgentIds": ["x"]})

    def save(self, request_id: str, entry: dict) -> Any:
        return services.entry_save(codex=self.codex, request_id=request_id, data=parse_entry_input(entry))

    def update(self, expected: int, entry: dict, entry_id: Any = None) -> Any:
        return services.entry_update(
            codex=self.codex,
            entry_id=entry_id or self.entry.id,
            expected_revision=expected,
            data=parse_entry_input(entry),
        )

    @override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1_000_000)
    def test_a_get_call_with_its_token_check_is_one_round_trip(self) -> None:
        raw_token = mint_access_token(user=self.codex.owner, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        token = token_checksum(raw_token)
        last_use_already_written(self, raw_token)  # written once a minute: not this call's
        arguments = {"id": str(self.entry.id)}
        results: list[dict] = []
        for _ in range(3):  # past the threshold at which the statement is prepared
            self.assertEqual(round_trips(lambda: results.append(execute("field_notes_get", arguments, token))), 1)
        self.assertEqual([result["entry"]["id"] for result in results], [str(self.entry.id)] * 3)

    @override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1_000_000)
    def test_a_write_call_with_its_token_check_is_two_round_trips(self) -> None:
        raw_token = mint_access_token(
            user=self.codex.owner, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=1)
        )
        token = token_checksum(raw_token)
        last_use_already_written(self, raw_token)  # written once a minute: not this call's
        for revision in range(1, 4):  # past the threshold at which the statements are prepared
            with self.subTest(revision=revision):
                save = {"requestId": f"call-{revision}", "entry": {"content": "x", "tags": ["a"]}}
                self.assertEqual(round_trips(lambda save=save: execute("field_notes_save", save, token)), 2)
                update = {"id": str(self.entry.id), "expectedRevision": revision, "entry": {"content": f"v{revision}"}}
                self.assertEqual(round_trips(lambda update=update: execute("field_notes_update", update, token)), 2)

    def test_a_save_is_one_round_trip(self) -> None:
        entry = {"content": "x", "title": "t", "tags": ["a", "b"], "relatedAgentIds": ["y"], "provenance": {"p": 1}}
        self.assertEqual(round_trips(lambda: self.save("new", entry)), 1)

    def test_an_update_is_one_round_trip_whether_or_not_its_index_rows_change(self) -> None:
        self.assertEqual(round_trips(lambda: self.update(1, {"content": "y", "tags": ["b", "c"]})), 1)
        self.assertEqual(round_trips(lambda: self.update(2, {"content": "z", "tags": ["b", "c"]})), 1)
        self.assertEqual(sorted(EntryTag.objects.filter(entry=self.entry).values_list("value", flat=True)), ["b", "c"])
        self.assertFalse(EntryRelatedAgent.objects.filter(entry=self.entry).exists())

    def test_an_update_keeps_the_index_rows_of_values_it_keeps(self) -> None:
        kept = EntryTag.objects.get(entry=self.entry, value="b").pk
        self.update(1, {"content": "y", "tags": ["b", "c"], "relatedAgentIds": ["x"]})
        self.assertEqual(EntryTag.objects.get(entry=self.entry, value="b").pk, kept)

    def test_a_conflict_or_a_missing_entry_is_known_from_the_one_round_trip(self) -> None:
        with self.assertRaises(Conflict):
            self.assertEqual(round_trips(lambda: self.update(7, {"content": "y"})), 1)
        self.assertEqual(
            self.trips_raising(NotFound, lambda: self.update(1, {"content": "y"}, entry_id=uuid.uuid4())), 1
        )
        self.assertEqual(self.trips_raising(Conflict, lambda: self.update(7, {"content": "y"})), 1)

    def test_a_statement_is_prepared_once_per_connection(self) -> None:
        if settings.PG_PREPARE_THRESHOLD is None:
            self.skipTest("CODEX_PG_PREPARE_THRESHOLD=none: nothing is prepared")
        preparations = [
            exchanges(lambda expected=expected: self.update(expected, {"content": f"v{expected}"})).count(PREPARATION)
            for expected in range(1, settings.PG_PREPARE_THRESHOLD + 4)
        ]
        self.assertEqual(sum(preparations), 1)

    def test_only_a_failure_reads_again(self) -> None:
        # A replay: the statement collides on the request key, then the winner is read.
        self.assertEqual(
            round_trips(lambda: self.save("seed", {"content": "seed", "tags": ["a", "b"], "relatedAgentIds": ["x"]})), 2
        )
        # A refused charge: the statement writes nothing, then the usage is read for the
        # message and the request key for a replay.
        with override_settings(CODEX_QUOTA_ENTRIES=1):
            self.assertEqual(self.trips_raising(ResourceExhausted, lambda: self.save("full", {"content": "x"})), 3)

    def test_the_count_sees_transaction_control(self) -> None:
        # The plain ORM's save, for comparison: BEGIN, a statement per row, COMMIT, each a round trip.
        with override_settings(CODEX_FAST_PATH=False):
            messages = traced(lambda: self.save("plain", {"content": "x", "tags": ["a"]}))
        queries = [content for direction, kind, content in messages if (direction, kind) == ("F", "Query")]
        self.assertEqual((queries[0].strip(), queries[-1].strip()), ('"BEGIN"', '"COMMIT"'))
        self.assertEqual(len(queries), sum(1 for _, kind, _ in messages if kind == "ReadyForQuery"))

    def trips_raising(self, error: type[Exception], work: Callable[[], Any]) -> int:
        def expect() -> None:
            with self.assertRaises(error):
                work()

        return round_trips(expect)
