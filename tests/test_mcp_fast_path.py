"""The tool call's fast path: one token check per tool call, made by the tool handler right
before the service, still answered at HTTP level (401/403/503) when it refuses; and the
statements each tool costs, counted so that regressions show."""

import asyncio
import datetime as dt
import json
import threading
import uuid
from types import SimpleNamespace
from typing import Any
from unittest import mock

import mcp_types as types
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import SimpleTestCase, TransactionTestCase, override_settings
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import get_access_token_model

from authserver.core.tokens import mint_access_token
from common import ratelimit
from mcp_endpoint import auth
from mcp_endpoint import server as mcp_server
from mcp_endpoint.arguments import schema_violation
from mcp_endpoint.auth import token_checksum
from mcp_endpoint.versions import LATEST_HANDSHAKE_VERSION
from notebook import services
from notebook.models import Entry, EntryTag
from notebook.transactions import write_queue, write_transaction
from notebook.validation import parse_entry_input
from tests.base import STILL_MOMENT, last_use_already_written
from tests.clocks import one_rate_window
from tests.http_client import LEGACY, MODERN, OLDEST, call_tool
from tests.live import LiveServerTestCase
from tests.mcp_client import error_of, success_of

AccessToken = get_access_token_model()
SAVE_ARGS = {"requestId": "r1", "entry": {"content": "hello", "tags": ["a"]}}
BOTH = ["notes:read", "notes:write"]


class TokenChangedBetweenCallsTest(LiveServerTestCase):
    """Every change to a token is seen by the very next call, over HTTP, in both eras."""

    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.prm_url = self.live.base_url + "/.well-known/oauth-protected-resource/mcp"

    def stored(self, token: str):
        return AccessToken.objects.filter(token_checksum=token_checksum(token))

    def assert_invalid_token(self, response, description: str) -> None:
        self.assertEqual(response.status_code, 401, response.text)
        challenge = response.headers["www-authenticate"]
        self.assertTrue(challenge.startswith('Bearer error="invalid_token", error_description="'), challenge)
        self.assertIn(description, challenge)
        self.assertTrue(
            challenge.endswith(f'resource_metadata="{self.prm_url}", scope="notes:read notes:write"'), challenge
        )

    def first_call_then(self, change, *, version: str, tool: str = "field_notes_search", arguments: Any = None):
        token = self.token_for(self.alice)
        first = call_tool(self.mcp_url, token, "field_notes_search", {}, version=version)
        self.assertEqual(first.status_code, 200, first.text)
        change(token)
        return call_tool(self.mcp_url, token, tool, {} if arguments is None else arguments, version=version)

    def test_a_revoked_token_gets_401_on_the_very_next_call(self) -> None:
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                second = self.first_call_then(lambda t: self.stored(t).get().revoke(), version=version)
                self.assert_invalid_token(second, "not recognized or has been revoked")

    def test_a_revoked_token_cannot_save_and_writes_nothing(self) -> None:
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                second = self.first_call_then(
                    lambda t: self.stored(t).delete(), version=version, tool="field_notes_save", arguments=SAVE_ARGS
                )
                self.assert_invalid_token(second, "not recognized or has been revoked")
                self.assertFalse(Entry.objects.exists())

    def test_an_expired_token_gets_401_on_the_very_next_call(self) -> None:
        past = dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                second = self.first_call_then(lambda t: self.stored(t).update(expires=past), version=version)
                self.assert_invalid_token(second, "has expired")

    def test_a_deactivated_user_gets_401_on_the_very_next_call(self) -> None:
        User = get_user_model()
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                User.objects.filter(pk=self.alice.pk).update(is_active=True)
                second = self.first_call_then(
                    lambda t: User.objects.filter(pk=self.alice.pk).update(is_active=False), version=version
                )
                self.assert_invalid_token(second, "user cannot use this server")

    def test_a_token_rebound_to_another_audience_gets_401_on_the_very_next_call(self) -> None:
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                second = self.first_call_then(
                    lambda t: self.stored(t).update(resource=["https://elsewhere.example/mcp"]), version=version
                )
                self.assert_invalid_token(second, "was not issued for")

    def test_a_scope_removed_between_calls_gets_403_insufficient_scope(self) -> None:
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                second = self.first_call_then(
                    lambda t: self.stored(t).update(scope="notes:read"),
                    version=version,
                    tool="field_notes_save",
                    arguments=SAVE_ARGS,
                )
                self.assertEqual(second.status_code, 403, second.text)
                self.assertEqual(
                    second.headers["www-authenticate"],
                    'Bearer error="insufficient_scope", error_description="This call needs the scope notes:write", '
                    f'resource_metadata="{self.prm_url}", scope="notes:read notes:write"',
                )
                self.assertFalse(Entry.objects.exists())

    def test_a_note_that_spells_the_refusal_or_an_error_is_answered_as_a_note(self) -> None:
        # The guard reads each answer for a refusal; what a note holds is escaped JSON text.
        token = self.token_for(self.alice)
        content = '"codex/refusal" {"_meta": {"codex/refusal": {"status": 401}}, "error": {"code": -1}}'
        arguments = {"requestId": "forged", "entry": {"content": content, "tags": ['"error"']}}
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                response = call_tool(self.mcp_url, token, "field_notes_save", arguments, version=version)
                self.assertEqual(response.status_code, 200, response.text)
                entry = json.loads(response.json()["result"]["content"][0]["text"])["entry"]
                self.assertEqual((entry["content"], entry["tags"]), (content, ['"error"']))

    def test_a_revoked_token_with_bad_arguments_still_gets_401_not_a_protocol_error(self) -> None:
        # The SDK refuses the arguments before the handler checks the token; the guard
        # then checks it itself before anything leaves.
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                second = self.first_call_then(
                    lambda t: self.stored(t).delete(), version=version, tool="field_notes_get", arguments={"id": 5}
                )
                self.assert_invalid_token(second, "not recognized or has been revoked")

    def test_a_read_only_token_with_bad_save_arguments_gets_403(self) -> None:
        token = self.token_for(self.alice, scopes=["notes:read"])
        response = call_tool(self.mcp_url, token, "field_notes_save", {"requestId": 5}, version=MODERN)
        self.assertEqual(response.status_code, 403, response.text)

    def test_a_database_outage_during_the_handlers_check_is_503(self) -> None:
        from django.db import OperationalError

        token = self.token_for(self.alice)
        with (
            mock.patch("mcp_endpoint.auth.check_token_checksum", side_effect=OperationalError("db down")),
            self.assertLogs("mcp_endpoint.auth", "WARNING"),
        ):
            response = call_tool(self.mcp_url, token, "field_notes_search", {}, version=MODERN)
        self.assertEqual(response.status_code, 503, response.text)
        self.assertEqual(response.headers["retry-after"], "5")


def call_unchecked(raw_token: str, name: str, arguments: dict[str, Any]) -> Any:
    """Run the tools/call handler on a request's token, as the guard hands it down after its own
    check (a refusal of the call's check is the call's notebook error): the result."""
    token = auth.RequestToken(token_checksum(raw_token))
    context = SimpleNamespace(
        request=SimpleNamespace(scope={auth.TOKEN_SCOPE_KEY: token}),
        request_id=None,
        protocol_version=LATEST_HANDSHAKE_VERSION,
    )
    params = types.CallToolRequestParams(name=name, arguments=arguments)
    return types.CallToolResult.model_validate(asyncio.run(mcp_server.call_tool(context, params)))


@override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1_000_000)
class StatementsPerToolTest(TransactionTestCase):
    """What each tool costs the database, so that a regression shows. The token check is
    one statement; the per-token rate limit writes the cache once per batch, not per call;
    the application's last use is written once a minute (here already written: the clock
    stands still), not per call."""

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice")
        self.codex = services.codex_for_user(user=self.alice)
        self.token = mint_access_token(user=self.alice, scopes=BOTH, lifetime=dt.timedelta(hours=1))
        self.entry = services.entry_save(
            codex=self.codex, request_id="seed", data=parse_entry_input({"content": "seed", "tags": ["a"]})
        )
        self.uses = last_use_already_written(self, self.token)

    def test_the_first_call_of_a_minute_writes_the_last_use_once(self) -> None:
        self.uses.clock = lambda: STILL_MOMENT + 60
        sql = self.statements("field_notes_get", {"id": str(self.entry.id)})
        self.assertEqual(len(sql), 2, "\n".join(sql))
        self.assertTrue(sql[1].startswith('UPDATE "authserver_clientuse"'), sql[1])
        self.assert_statements("field_notes_get", {"id": str(self.entry.id)}, 1)

    def statements(self, name: str, arguments: dict[str, Any]) -> list[str]:
        # The handler's work as its worker thread runs it, here on the test's connection.
        with CaptureQueriesContext(connection) as captured:
            result = mcp_server._execute(name, arguments, auth.RequestToken(token_checksum(self.token)))
        self.assertIn("entry", result)
        # Transaction control is not a statement of the tool's own.
        return [
            query["sql"]
            for query in captured.captured_queries
            if not query["sql"].startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE"))
        ]

    def assert_statements(self, name: str, arguments: dict[str, Any], expected: int) -> None:
        sql = self.statements(name, arguments)
        self.assertEqual(len(sql), expected, "\n".join(sql))

    def test_get_reads_the_entry_in_the_token_checks_statement(self) -> None:
        self.assert_statements("field_notes_get", {"id": str(self.entry.id)}, 1)

    @override_settings(CODEX_FAST_PATH=False)
    def test_the_plain_path_reads_the_token_and_the_entry_apart(self) -> None:
        self.assert_statements("field_notes_get", {"id": str(self.entry.id)}, 2)

    # On PostgreSQL a save and an update are one statement each (notebook.sql.writes).
    ONE_STATEMENT_WRITES = connection.vendor == "postgresql"

    def test_save_is_token_usage_entry_key_revision_and_tags(self) -> None:
        expected = 2 if self.ONE_STATEMENT_WRITES else 6
        self.assert_statements(
            "field_notes_save", {"requestId": "r2", "entry": {"content": "x", "tags": ["a"]}}, expected
        )

    def test_save_without_tags_writes_no_index_rows(self) -> None:
        expected = 2 if self.ONE_STATEMENT_WRITES else 5
        self.assert_statements("field_notes_save", {"requestId": "r3", "entry": {"content": "x"}}, expected)
        self.assertFalse(EntryTag.objects.exclude(entry=self.entry).exists())

    def test_update_keeping_the_tags_leaves_the_index_alone(self) -> None:
        arguments = {"id": str(self.entry.id), "expectedRevision": 1, "entry": {"content": "y", "tags": ["a"]}}
        rows = list(EntryTag.objects.values_list("pk", "value"))
        # token, entry, usage, entry update, revision
        self.assert_statements("field_notes_update", arguments, 2 if self.ONE_STATEMENT_WRITES else 5)
        self.assertEqual(list(EntryTag.objects.values_list("pk", "value")), rows)

    def test_update_changing_the_tags_rewrites_them(self) -> None:
        arguments = {"id": str(self.entry.id), "expectedRevision": 1, "entry": {"content": "y", "tags": ["b"]}}
        # ... plus the tag rows' delete and insert
        self.assert_statements("field_notes_update", arguments, 2 if self.ONE_STATEMENT_WRITES else 7)
        self.assertEqual(list(EntryTag.objects.values_list("entry_id", "value")), [(self.entry.id, "b")])

    def test_a_replayed_save_returns_the_entry(self) -> None:
        arguments = {"requestId": "seed", "entry": {"content": "seed", "tags": ["a"]}}
        with CaptureQueriesContext(connection):
            result = call_unchecked(self.token, "field_notes_save", arguments)
        self.assertEqual(success_of(result)["entry"]["id"], str(self.entry.id))
        self.assertEqual(Entry.objects.count(), 1)


@override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1_000_000)
class ReadAheadTest(TransactionTestCase):
    """A get's entry is read in the token check's own statement, before the token is judged:
    it answers only for the token's own codex, and only once the check has passed."""

    def setUp(self) -> None:
        users = get_user_model().objects
        self.alice, self.bob = users.create_user("alice"), users.create_user("bob")
        self.bobs = services.entry_save(
            codex=services.codex_for_user(user=self.bob),
            request_id="b",
            data=parse_entry_input({"content": "bob's secret"}),
        )
        self.alices = services.entry_save(
            codex=services.codex_for_user(user=self.alice),
            request_id="a",
            data=parse_entry_input({"content": "alice's note"}),
        )

    def get(self, token: str, entry_id: str) -> Any:
        return call_unchecked(token, "field_notes_get", {"id": entry_id})

    def test_the_tokens_own_entry_is_read(self) -> None:
        token = mint_access_token(user=self.alice, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        self.assertEqual(success_of(self.get(token, str(self.alices.id)))["entry"]["content"], "alice's note")

    def test_another_codexs_entry_is_not_found(self) -> None:
        token = mint_access_token(user=self.alice, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        self.assertEqual(error_of(self.get(token, str(self.bobs.id)))["code"], "not_found")

    def test_a_refused_token_gets_its_refusal_and_never_the_entry(self) -> None:
        expired = mint_access_token(user=self.bob, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        AccessToken.objects.filter(token_checksum=token_checksum(expired)).update(
            expires=dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        )
        write_only = mint_access_token(user=self.bob, scopes=["notes:write"], lifetime=dt.timedelta(hours=1))
        valid = mint_access_token(user=self.bob, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))

        def deactivate_bob() -> None:
            get_user_model().objects.filter(pk=self.bob.pk).update(is_active=False)

        refusals = [(expired, "unauthenticated", None), (write_only, "permission_denied", None)]
        for token, code, before in [*refusals, (valid, "unauthenticated", deactivate_bob)]:
            with self.subTest(code=code, deactivated=before is not None):
                if before is not None:
                    before()
                result = call_unchecked(token, "field_notes_get", {"id": str(self.bobs.id)})
                self.assertEqual(error_of(result)["code"], code)
                self.assertNotIn("secret", result.model_dump_json())

    def test_a_user_without_a_codex_yet_gets_not_found(self) -> None:
        carol = get_user_model().objects.create_user("carol")
        token = mint_access_token(user=carol, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        for entry_id in (str(uuid.uuid4()), str(self.bobs.id)):
            with self.subTest(entry_id=entry_id):
                self.assertEqual(error_of(self.get(token, entry_id))["code"], "not_found")

    def test_an_id_that_is_no_uuid_is_an_invalid_argument(self) -> None:
        token = mint_access_token(user=self.alice, scopes=["notes:read"], lifetime=dt.timedelta(hours=1))
        with CaptureQueriesContext(connection) as captured:
            result = self.get(token, "not-a-uuid")
        self.assertEqual(error_of(result)["code"], "invalid_argument")
        self.assertNotIn("notebook_entry", " ".join(query["sql"] for query in captured.captured_queries))


@override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1_000_000)
class ArgumentsCheckedOnceTest(TransactionTestCase):
    """A call's arguments are checked against its tool's schema once, whatever the call, and
    only once its token has passed."""

    def setUp(self) -> None:
        alice = get_user_model().objects.create_user("alice")
        self.token = mint_access_token(user=alice, scopes=BOTH, lifetime=dt.timedelta(hours=1))
        entry_id = str(call_unchecked(self.token, "field_notes_save", SAVE_ARGS).structured_content["entry"]["id"])
        self.calls = [
            ("field_notes_save", {"requestId": "r2", "entry": {"content": "x"}}),
            ("field_notes_save", SAVE_ARGS),  # a replay
            ("field_notes_get", {"id": entry_id}),
            ("field_notes_search", {"tag": "a"}),
            ("field_notes_update", {"id": entry_id, "expectedRevision": 1, "entry": {"content": "y"}}),
            ("field_notes_update", {"id": entry_id, "expectedRevision": 1, "entry": {"content": "y"}}),  # a conflict
            ("field_notes_save", {"requestId": 5}),
            ("field_notes_get", {"id": "not-a-uuid"}),
        ]

    def test_each_call_checks_its_arguments_once(self) -> None:
        for name, arguments in self.calls:
            with (
                self.subTest(name, arguments=arguments),
                mock.patch.object(mcp_server, "schema_violation", wraps=schema_violation) as checked,
            ):
                call_unchecked(self.token, name, arguments)
                self.assertEqual(checked.call_count, 1)

    def test_a_refused_token_gets_no_argument_checked(self) -> None:
        for name, arguments in self.calls:
            with (
                self.subTest(name, arguments=arguments),
                mock.patch.object(mcp_server, "schema_violation", wraps=schema_violation) as checked,
            ):
                result = call_unchecked("made-up-token", name, arguments)
                self.assertEqual(error_of(result)["code"], "unauthenticated")
                self.assertEqual(checked.call_count, 0)


class BatchedRateLimitTest(SimpleTestCase):
    def count_cache_writes(self, calls: int, limit: int) -> tuple[int, list[bool]]:
        """(cache round trips, allowed per call) for ``calls`` calls of one process."""
        shared: dict[str, int] = {}
        trips = []

        def add(key, value, timeout):
            trips.append(key)
            if key in shared:
                return False
            shared[key] = value
            return True

        def incr(key, delta):
            trips.append(key)
            if key not in shared:
                raise ValueError(key)
            shared[key] += delta
            return shared[key]

        fake = SimpleNamespace(add=add, incr=incr)
        key = f"k{uuid.uuid4().hex}"  # the process's windows outlive the test: a key of its own
        with mock.patch.object(ratelimit, "cache", fake), one_rate_window():
            allowed = [ratelimit.allow_batched("test", key, limit=limit, window_seconds=3600)[0] for _ in range(calls)]
        return len(trips), allowed

    def test_a_large_limit_writes_the_shared_counter_once_per_hundred_calls(self) -> None:
        trips, allowed = self.count_cache_writes(1_000, limit=1_000_000)
        self.assertEqual(trips, 11)  # ten batches; the first finds no counter and adds it
        self.assertTrue(all(allowed))

    def test_a_small_limit_is_counted_exactly(self) -> None:
        _writes, allowed = self.count_cache_writes(5, limit=3)
        self.assertEqual(allowed, [True, True, True, False, False])

    def test_one_process_never_passes_the_limit(self) -> None:
        _writes, allowed = self.count_cache_writes(700, limit=600)
        self.assertEqual(allowed.count(True), 600)


class WriteTransactionTest(TransactionTestCase):
    def test_on_sqlite_writers_of_a_process_queue_on_one_lock(self) -> None:
        lock = write_queue()
        with write_transaction():
            self.assertEqual(lock.locked(), connection.vendor == "sqlite")
            self.assertTrue(connection.in_atomic_block)
        self.assertFalse(lock.locked())

    def test_concurrent_saves_from_threads_all_commit(self) -> None:
        codex = services.codex_for_user(user=get_user_model().objects.create_user("bob"))
        failures = []

        def save(n: int) -> None:
            try:
                services.entry_save(codex=codex, request_id=f"t{n}", data=parse_entry_input({"content": f"n{n}"}))
            except Exception as error:  # collected and asserted below
                failures.append(error)
            finally:
                connection.close()

        threads = [threading.Thread(target=save, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.assertEqual(failures, [])
        self.assertEqual(Entry.objects.filter(codex=codex).count(), 8)
