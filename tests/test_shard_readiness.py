"""Shard readiness (docs/capacity.md): every statement that reaches a notebook table from the
four tools, the person's pages, export, import and a codex's deletion is confined to one codex,
on the fast path and the plain ORM, on SQLite and PostgreSQL.

The statements are captured with an execute wrapper on the connection: while one watches, the
fast path sends its own statements through Django's cursor too (``notebook.sql.driver``) and
SQLite's writes stay on the thread's connection (``notebook.transactions``). The capture is
checked against what the database itself received (libpq's trace of the protocol on
PostgreSQL, SQLite's trace callback on the thread's and the write connection), so that no
statement reaches it unseen. Each statement is then read by ``tests.shard_keys``: every
notebook table it names must be pinned to a codex, and every codex it is pinned to must be the
caller's. A statement that finds its codex inside itself reaches one codex, but a distributed
database could not route it from its parameters: only the token check (which reads a get's
entry on the token's codex) may.

Operators' surfaces (the admin, the metrics' totals) and an account's deletion of its OAuth
applications reach every codex by design; docs/capacity.md lists them.
"""

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test import Client, SimpleTestCase, TransactionTestCase, override_settings
from django.urls import reverse

from mcp_endpoint import server
from mcp_endpoint.auth import token_checksum
from mycodex.forms import CLEAR_PHRASE
from notebook import services
from notebook.exceptions import Conflict, NotFound, ResourceExhausted
from notebook.models import Entry, EntryRevision
from notebook.validation import parse_entry_input
from tests.base import connect_application, last_use_already_written
from tests.shard_keys import Confinement, confinement, is_control, unique_keys

KEYS = unique_keys()
RARE = "quillfeather"  # in one entry of the seeded codex: its search takes the trigram index
COMMON = "launch"  # in every other entry
SEEDED = 150  # past a search's first sample, so that a rare word's search reaches the index
_PARAMETER = re.compile(r"%\(\w+\)s|%s")

Statement = tuple[str, Any]


def _head(sql: str) -> str:
    """A statement's text up to its first parameter, as the database receives it."""
    return _PARAMETER.split(sql, maxsplit=1)[0].replace("%%", "%")


def _collapsed(items: list[Any]) -> list[Any]:
    """``items`` without an item equal to the one before (SQLite reports a statement again for
    each trigger or virtual table it runs)."""
    return [item for index, item in enumerate(items) if index == 0 or item != items[index - 1]]


def _sent(statement: str) -> bool:
    """Whether the caller sent ``statement``: not transaction control, a connection's set-up,
    psycopg's own housekeeping (a server-side cursor's FETCH and CLOSE, which read what its
    DECLARE's statement found; DEALLOCATE after a rollback), nor what SQLite's FTS5 table runs
    on its own tables (quoted as ``'main'.'table'``)."""
    return not (
        is_control(statement)
        or statement.startswith(("--", "PRAGMA", "FETCH ", "CLOSE ", "DEALLOCATE "))
        or "'main'.'notebook_entry_trigram" in statement
    )


# A server-side cursor's statement, as psycopg sends it (Django's ``iterator()`` on PostgreSQL).
_DECLARE = re.compile(r'^DECLARE "[^"]+" (?:NO SCROLL )?CURSOR (?:WITH(?:OUT)? HOLD )?FOR ')


def _message_text(kind: str, content: str) -> str | None:
    """The statement of a Query or Parse message as libpq's trace shows it (quoted, unescaped)."""
    if kind == "Query":
        return content.strip()[1:-1]
    if kind == "Parse":
        found = re.match(r'\s*"[^"]*" "(.*)" \d+', content)
        return found.group(1) if found else content
    return None


def _same(received: str, head: str) -> bool:
    """Whether the database received the statement whose text begins with ``head``. (libpq's
    trace ends a message's line at a newline in a value, and so may show only its start.)"""
    return received.startswith(head) or head.startswith(received)


@contextlib.contextmanager
def _sqlite_trace() -> Iterator[list[str]]:
    """What SQLite ran on this thread's connection and on the process's write connection."""
    received: list[str] = []
    connection.ensure_connection()
    writer = _write_connection()
    traced = [connection.connection, *([writer] if writer is not None else [])]
    for raw in traced:
        raw.set_trace_callback(received.append)
    try:
        yield received
    finally:
        for raw in traced:
            raw.set_trace_callback(None)


def _write_connection() -> Any:
    from notebook.sqlite.files import file_of

    writer = file_of(connections[DEFAULT_DB_ALIAS]).connection
    writer.ensure_connection()
    return writer.connection


def captured(work: Callable[[], Any]) -> list[Statement]:
    """Every statement ``work()`` sends on this thread's connection, with its parameters,
    checked to be every statement the database received (the module's docstring)."""
    statements: list[Statement] = []

    def watch(execute, sql, params, many, context):
        statements.extend((sql, one) for one in (params if many else [params]))
        return execute(sql, params, many, context)

    def watched() -> None:
        with connection.execute_wrapper(watch):
            work()

    if connection.vendor == "postgresql":
        from tests.wire import traced

        messages = traced(watched)
        # Watched, every statement goes through Django's cursor, which binds on the client: one
        # simple Query message each, its values written in.
        # Watched, every statement goes through Django's cursor, which binds on the client: one
        # simple Query message each, its values written in; a server-side cursor's DECLARE
        # (Django's ``iterator()``) is one Parse of the extended protocol.
        received = [_message_text(kind, content) for direction, kind, content in messages if direction == "F"]
        received = [text for text in received if text is not None]
        received = [_DECLARE.sub("", text) for text in received if _sent(text)]
        sent = [(sql, params) for sql, params in statements if _sent(sql)]
    else:
        with _sqlite_trace() as received:
            watched()
        received = _collapsed([text for text in received if _sent(text)])
        sent = _collapsed([(sql, params) for sql, params in statements if _sent(sql)])
    heads = [_head(sql) for sql, _ in sent]
    unseen = [text for text in received if not any(_same(text, head) for head in heads)]
    assert len(received) == len(sent) and all(_same(text, head) for text, head in zip(received, heads, strict=True)), (
        f"the database received {len(received)} statements, the capture saw {len(sent)}; "
        f"received but not captured: {unseen[:3]}"
    )
    return statements


def judged(statements: list[Statement]) -> list[Confinement]:
    found = [confinement(sql, params, connection.vendor, KEYS) for sql, params in statements]
    return [verdict for verdict in found if verdict.notebook]


def assert_one_codex(statements: list[Statement], *, codex: Any, owner: Any) -> list[Confinement]:
    """Fail unless every statement that names a notebook table reaches ``codex`` alone (and,
    where it names an owner, ``owner``), routed by its parameters unless it is the token check."""
    verdicts = judged(statements)
    assert verdicts, "no statement reached a notebook table"
    failures = []
    for verdict in verdicts:
        problems = verdict.problems(codex=codex, owner=owner)
        if verdict.confined and not verdict.routed_by_parameter and '"oauth2_provider_accesstoken"' not in verdict.sql:
            problems.append("its codex is found inside it, not given: no distributed database could route it")
        if problems:
            failures.append(f"{'; '.join(problems)}:\n    {verdict.sql}")
    assert not failures, "statements that reach beyond one codex:\n" + "\n".join(failures)
    return verdicts


class ConfinementCheckTest(SimpleTestCase):
    """``tests.shard_keys`` on statements written by hand: what it must accept and refuse."""

    def verdict(self, sql: str, params: Any = (7,)) -> Confinement:
        return confinement(sql, params, "postgresql", KEYS)

    def test_a_predicate_on_the_codex_key_pins_a_table(self) -> None:
        verdict = self.verdict('SELECT id FROM "notebook_entry" WHERE "notebook_entry"."codex_id" = (%s)::bigint')
        self.assertTrue(verdict.confined)
        self.assertTrue(verdict.routed_by_parameter)
        self.assertEqual(verdict.codex_values, {"7"})

    def test_a_table_named_by_its_id_alone_is_pinned_to_no_codex(self) -> None:
        # One row, and so one codex, but no distributed database could tell which node holds it.
        verdict = self.verdict('SELECT * FROM "notebook_entry" WHERE "notebook_entry"."id" = %s')
        self.assertFalse(verdict.confined)

    def test_a_join_pins_each_table_on_its_own(self) -> None:
        joined = (
            'SELECT * FROM "notebook_entry" INNER JOIN "notebook_entrytag"'
            ' ON ("notebook_entry"."id" = "notebook_entrytag"."entry_id")'
            ' WHERE ("notebook_entry"."codex_id" = %s AND "notebook_entrytag"."value" = %s)'
        )
        self.assertEqual(
            [reach.pinned_by is not None for reach in self.verdict(joined, (7, "t")).reaches], [True, False]
        )
        both = joined.replace(
            '"value" = %s', '"value" = %s AND "notebook_entrytag"."codex_id" = "notebook_entry"."codex_id"'
        )
        self.assertTrue(self.verdict(both, (7, "t")).confined)

    def test_a_left_joins_condition_pins_only_the_table_it_joins(self) -> None:
        sql = 'SELECT * FROM "notebook_entry" e LEFT JOIN "notebook_codex" c ON c."id" = %s AND e."codex_id" = %s'
        reaches = {reach.table: reach.pinned_by is not None for reach in self.verdict(sql, (7, 7)).reaches}
        self.assertEqual(reaches, {"notebook_entry": False, "notebook_codex": True})

    def test_two_codexes_are_pinned_but_not_one(self) -> None:
        verdict = self.verdict('SELECT * FROM "notebook_entry" WHERE "codex_id" IN (%s, %s)', (7, 8))
        self.assertTrue(verdict.confined)
        self.assertEqual(verdict.problems(codex=7, owner=1), ["codex keys equal ['7', '8'], not only codex 7"])

    def test_a_codex_found_through_the_tokens_row_is_one_codex_not_routed_by_a_parameter(self) -> None:
        sql = (
            'SELECT * FROM "oauth2_provider_accesstoken" t LEFT JOIN "auth_user" u ON u."id" = t."user_id"'
            ' LEFT JOIN "notebook_codex" c ON c."owner_id" = u."id"'
            ' LEFT JOIN "notebook_entry" r ON r."codex_id" = c."id" AND r."id" = %s WHERE t."token_checksum" = %s'
        )
        verdict = self.verdict(sql, (str(uuid.uuid4()), "checksum"))
        self.assertTrue(verdict.confined)
        self.assertFalse(verdict.routed_by_parameter)
        without_token = sql.replace('WHERE t."token_checksum" = %s', "")
        self.assertFalse(self.verdict(without_token, (str(uuid.uuid4()),)).confined)

    def test_inserted_rows_carry_their_codex(self) -> None:
        insert = 'INSERT INTO "notebook_entrytag" ("codex_id", "entry_id", "value") VALUES (%s, %s, %s), (%s, %s, %s)'
        verdict = self.verdict(insert, (7, "e", "a", 8, "e", "b"))
        self.assertTrue(verdict.confined)
        self.assertEqual(verdict.codex_values, {"7", "8"})
        unnested = (
            'INSERT INTO "notebook_entrytag" ("codex_id", "entry_id", "value")'
            " SELECT * FROM UNNEST((%s)::bigint[], (%s)::uuid[], (%s)::varchar[])"
        )
        self.assertEqual(self.verdict(unnested, ([7, 7], ["e", "e"], ["a", "b"])).codex_values, {"7"})

    def test_rows_written_from_a_ctes_row_carry_its_codex(self) -> None:
        sql = (
            'WITH entry AS (INSERT INTO "notebook_entry" ("id", "codex_id") SELECT %(id)s::uuid, %(codex_id)s::bigint'
            ' RETURNING "codex_id", "id") INSERT INTO "notebook_entrytag" ("codex_id", "entry_id", "value")'
            ' SELECT entry."codex_id", entry."id", item'
            " FROM entry CROSS JOIN jsonb_array_elements_text(%(tags)s) AS item"
        )
        verdict = self.verdict(sql, {"id": "e", "codex_id": 7, "tags": "[]"})
        self.assertTrue(verdict.confined)
        self.assertEqual(verdict.codex_values, {"7"})
        elsewhere = sql.replace('SELECT entry."codex_id"', "SELECT %(other)s")
        self.assertEqual(
            self.verdict(elsewhere, {"id": "e", "codex_id": 7, "tags": "[]", "other": 8}).codex_values, {"7", "8"}
        )


class ShardReadinessTest(TransactionTestCase):
    """The real statements, on both paths (each test runs once per path)."""

    def setUp(self) -> None:
        User = get_user_model()
        self.alice = User.objects.create_user("alice", password="alice-password")
        self.codex = services.codex_for_user(user=self.alice)
        self.application, raw = connect_application(self.alice, "field-notes-app")
        self.token = token_checksum(raw)
        last_use_already_written(self, raw)  # the minute's last use is written: a call's own statements
        # Someone else's codex on the same server, whose ids the calls below try.
        bob = User.objects.create_user("bob")
        self.bob_entry = services.entry_save(
            codex=services.codex_for_user(user=bob), request_id="b", data=parse_entry_input({"content": "bob's"})
        )
        for number in range(SEEDED):
            words = RARE if number == SEEDED // 2 else COMMON
            entry = {"content": f"seeded note {number} on the {words} checklist", "tags": [f"t{number % 5}"]}
            entry["relatedAgentIds"] = [f"agent-{number % 3}"]
            self.call("field_notes_save", {"requestId": f"seed-{number}", "entry": entry})
        self.codex.refresh_from_db()

    def call(self, name: str, arguments: dict[str, Any], *, raises: type[Exception] | None = None) -> Any:
        with override_settings(CODEX_TOOL_CALLS_PER_MINUTE=1_000_000):
            if raises is None:
                return server._execute(name, arguments, self.token)
            with self.assertRaises(raises):
                server._execute(name, arguments, self.token)
        return None

    def every_tool_call(self) -> None:
        entry = {"content": f"a {RARE} note", "title": "t", "tags": ["t1", "new"], "relatedAgentIds": ["agent-1"]}
        entry["provenance"] = {"source": "test"}
        saved = self.call("field_notes_save", {"requestId": "new", "entry": entry})["entry"]
        self.call("field_notes_save", {"requestId": "new", "entry": entry})  # a replay
        self.call("field_notes_save", {"requestId": "new", "entry": {"content": "other"}}, raises=Conflict)
        with override_settings(CODEX_QUOTA_ENTRIES=1):
            self.call("field_notes_save", {"requestId": "full", "entry": {"content": "x"}}, raises=ResourceExhausted)
        for entry_id in (saved["id"], str(uuid.uuid4()), str(self.bob_entry.id)):
            self.call("field_notes_get", {"id": entry_id}, raises=None if entry_id == saved["id"] else NotFound)
        page = self.call("field_notes_search", {"limit": 5})
        self.call("field_notes_search", {"limit": 5, "cursor": page["nextCursor"]})
        for search in (
            {"tag": "t1"},
            {"relatedAgentId": "agent-2"},
            {"query": "zq"},
            {"query": RARE},
            {"query": COMMON},
            {"query": RARE, "tag": "t0"},
            {"query": RARE, "relatedAgentId": "agent-2"},
            {"query": "checklist\nt1"},
        ):
            self.call("field_notes_search", search)
        replacement = {"content": "rewritten", "tags": ["t2"], "relatedAgentIds": []}
        self.call("field_notes_update", {"id": saved["id"], "expectedRevision": 1, "entry": replacement})
        self.call(
            "field_notes_update", {"id": saved["id"], "expectedRevision": 1, "entry": replacement}, raises=Conflict
        )
        for missing in (str(uuid.uuid4()), str(self.bob_entry.id)):
            update = {"id": missing, "expectedRevision": 1, "entry": replacement}
            self.call("field_notes_update", update, raises=NotFound)
        with override_settings(CODEX_QUOTA_STORED_BYTES=1):
            update = {"id": saved["id"], "expectedRevision": 2, "entry": replacement}
            self.call("field_notes_update", update, raises=ResourceExhausted)

    def the_persons_pages(self) -> None:
        client = Client()
        client.force_login(self.alice)
        entry = Entry.objects.filter(codex=self.codex).order_by("id").first()
        services.entry_update(
            codex=self.codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": "v2"})
        )
        pages = [reverse("mycodex:list")]
        for query in ("order=id", f"q={RARE}", "q=zq", "tag=t1", "agent=agent-2", f"app={self.application.client_id}"):
            pages.append(f"{reverse('mycodex:list')}?{query}")
        pages += [reverse("mycodex:entry", args=[entry.id]), f"{reverse('mycodex:entry', args=[entry.id])}?from=1&to=2"]
        pages += [reverse("mycodex:delete", args=[entry.id]), reverse("authserver:clients"), reverse("mycodex:clear")]
        for page in pages:
            response = client.get(page)
            assert response.status_code == 200, (page, response.status_code)
        following = client.get(reverse("mycodex:list")).context.get("next_url")
        assert following and client.get(following).status_code == 200
        exported = b""
        for download in ("mycodex:export", "mycodex:export_markdown", "mycodex:export_markdown_zip"):
            content = b"".join(client.get(reverse(download)).streaming_content)
            exported = exported or content
        assert client.post(reverse("mycodex:delete", args=[entry.id])).status_code == 302
        upload = SimpleUploadedFile("codex.json", exported, content_type="application/json")
        assert client.post(reverse("mycodex:import"), {"file": upload}).status_code in (200, 302)
        assert json.loads(exported)["entries"]  # a real export, imported whole
        assert client.post(reverse("mycodex:clear"), {"confirmation": CLEAR_PHRASE}).status_code == 302

    def test_every_tool_call_reaches_one_codex_on_the_fast_path(self) -> None:
        with override_settings(CODEX_FAST_PATH=True):
            assert_one_codex(captured(self.every_tool_call), codex=self.codex.pk, owner=self.alice.pk)

    def test_every_tool_call_reaches_one_codex_on_the_plain_orm(self) -> None:
        with override_settings(CODEX_FAST_PATH=False):
            assert_one_codex(captured(self.every_tool_call), codex=self.codex.pk, owner=self.alice.pk)

    def test_the_persons_pages_export_and_import_reach_one_codex_on_the_fast_path(self) -> None:
        with override_settings(CODEX_FAST_PATH=True):
            assert_one_codex(captured(self.the_persons_pages), codex=self.codex.pk, owner=self.alice.pk)

    def test_the_persons_pages_export_and_import_reach_one_codex_on_the_plain_orm(self) -> None:
        with override_settings(CODEX_FAST_PATH=False):
            assert_one_codex(captured(self.the_persons_pages), codex=self.codex.pk, owner=self.alice.pk)

    def test_deleting_a_codex_reaches_that_codex_alone(self) -> None:
        statements = captured(lambda: services.codex_delete(codex=self.codex))
        assert_one_codex(statements, codex=self.codex.pk, owner=self.alice.pk)
        self.assertFalse(Entry.objects.filter(codex_id=self.codex.pk).exists())
        self.assertTrue(Entry.objects.filter(pk=self.bob_entry.pk).exists())

    def test_a_persons_first_call_makes_their_codex_alone(self) -> None:
        carol = get_user_model().objects.create_user("carol")
        _, raw = connect_application(carol, "carols-app")
        last_use_already_written(self, raw)
        arguments = {"requestId": "first", "entry": {"content": "hello"}}
        with override_settings(CODEX_FAST_PATH=True):
            statements = captured(lambda: server._execute("field_notes_save", arguments, token_checksum(raw)))
        carol.refresh_from_db()
        assert_one_codex(statements, codex=carol.codex.pk, owner=carol.pk)

    def test_a_planted_statement_that_reaches_past_the_codex_fails_the_check(self) -> None:
        entry = Entry.objects.filter(codex=self.codex).first()
        bob_codex = self.bob_entry.codex_id
        planted = {
            "an entry read by its id alone": lambda: Entry.objects.filter(pk=entry.pk).first(),
            "two codexes' entries": lambda: Entry.objects.filter(codex_id__in=[self.codex.pk, bob_codex]).count(),
            "a join to entries of any codex": lambda: EntryRevision.objects.filter(
                codex=self.codex, entry__title="x"
            ).count(),
            "another codex's entries": lambda: Entry.objects.filter(codex_id=bob_codex).count(),
        }
        for name, statement in planted.items():
            with self.subTest(planted=name):

                def work(statement=statement) -> None:
                    self.call("field_notes_get", {"id": str(entry.id)})
                    statement()

                statements = captured(work)
                with self.assertRaisesRegex(AssertionError, "statements that reach beyond one codex"):
                    assert_one_codex(statements, codex=self.codex.pk, owner=self.alice.pk)
                # The tool call alone passes: the planted statement is what fails.
                tool_only = captured(lambda: self.call("field_notes_get", {"id": str(entry.id)}))
                assert_one_codex(tool_only, codex=self.codex.pk, owner=self.alice.pk)

    def test_a_statement_sent_past_the_capture_fails_it(self) -> None:
        # Straight to the driver, as the fast path would were it not watched: the database
        # receives it, the execute wrapper never sees it.
        def unseen() -> None:
            raw = connection.connection.cursor()
            raw.execute("SELECT count(*) FROM notebook_entry")
            raw.fetchall()
            raw.close()

        with self.assertRaisesRegex(AssertionError, "the capture saw"):
            captured(unseen)
