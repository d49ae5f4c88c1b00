"""The search's statements built once per shape (notebook.sql.search) against the ORM.

The querysets of ``notebook.orm`` (the plain path, ``CODEX_FAST_PATH=0``) are the search's
candidate statements as the ORM wrote them before they were rendered by hand; their
plans are the ones docs/data.md describes (checked with EXPLAIN). For every filter
shape, the hand-rendered statement must send the very same SQL and give the very same
instances.
"""

import itertools
from typing import Any
from unittest import mock

from django.db import connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from notebook import orm, services, store
from notebook.models import Entry, EntryRevision
from notebook.prefilters import LIKE, TRIGRAM
from notebook.sql import search as search_sql
from notebook.sql.converters import ModelColumns
from notebook.sql.search import SearchStatements
from notebook.validation import parse_entry_input
from notebook.writers import APPLICATION
from tests.base import NotebookTestCase
from tests.test_selectors_search import search

CLIENT_ID = "client-of-the-app"


def loaded_state(entry: Entry) -> dict[str, Any]:
    """Everything an instance holds: its values, deferred fields, annotation and state."""
    values = {key: value for key, value in entry.__dict__.items() if key != "_state"}
    return {
        "type": type(entry),
        "values": values,
        "deferred": entry.get_deferred_fields(),
        "db": entry._state.db,
        "adding": entry._state.adding,
    }


class StatementsAgreeWithTheOrmTest(NotebookTestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        words = ["needle", "hay", "100%_\\", "Stra\u00dfe", "\ufb01ne", '"quoted"']
        for number in range(40):
            entry = {
                "content": f"{words[number % 6]} {words[number % 5]} " + "long " * (number % 50),
                "tags": [f"t{number % 3}", words[number % 4]],
                "relatedAgentIds": [f"agent-{number % 4}"],
            }
            if number % 2:
                entry["title"] = f"Note {words[number % 3]}"
            for codex in (cls.alice_codex, cls.bob_codex):
                services.entry_save(codex=codex, request_id=f"r{number}", data=parse_entry_input(entry))
        # An application wrote every third entry (the person's ?app= filter).
        ids = list(Entry.objects.filter(codex=cls.alice_codex).order_by("id").values_list("id", flat=True))
        EntryRevision.objects.filter(entry_id__in=ids[::3]).update(writer_kind=APPLICATION, writer_client_id=CLIENT_ID)
        cls.ids = ids

    def capture(self, fetch, *args: Any, **kwargs: Any) -> tuple[list[str], Any]:
        """The statements ``fetch`` sent, and what it returned."""
        with CaptureQueriesContext(connection) as captured:
            result = fetch(*args, **kwargs)
        return [query["sql"] for query in captured.captured_queries], result

    def test_every_shape_sends_the_orms_sql_and_makes_the_same_instances(self) -> None:
        statements = SearchStatements()
        shapes = 0
        for after, upto, tag, agent, written_by, (prefilter, query), search_columns in itertools.product(
            [None, self.ids[5]],
            [None, self.ids[30]],
            [None, "t1"],
            [None, "agent-2"],
            [None, CLIENT_ID],
            [(None, ""), (LIKE, "needle"), (TRIGRAM, "needle"), (LIKE, "100%_\\"), (TRIGRAM, "100%_\\"), (LIKE, '"q')],
            [False, True],
        ):
            filters = {
                "after": after,
                "upto": upto,
                "tag": tag,
                "agent": agent,
                "written_by": written_by,
                "query": query,
                "prefilter": prefilter,
                "search_columns": search_columns,
            }
            for limit in (1, 21):
                with self.subTest(limit=limit, **filters):
                    sql, entries = self.capture(
                        statements.candidates, codex_id=self.alice_codex.pk, limit=limit, **filters
                    )
                    orm_sql, expected = self.capture(
                        lambda **kwargs: orm.search_candidates(self.alice_codex.pk, **kwargs), limit=limit, **filters
                    )
                    self.assertEqual(sql, orm_sql)
                    self.assertEqual([loaded_state(e) for e in entries], [loaded_state(e) for e in expected])
            shapes += 1
        # Some shapes found entries, so the comparison compared something.
        found = statements.candidates(codex_id=self.alice_codex.pk, limit=50, tag="t1", prefilter=LIKE, query="needle")
        self.assertTrue(found)
        self.assertEqual(shapes, 2 * 2 * 2 * 2 * 2 * 6 * 2)

    def test_the_window_end_sends_the_orms_sql(self) -> None:
        statements = SearchStatements()
        for after, tag, agent in itertools.product([None, self.ids[3]], [None, "t2"], [None, "agent-1"]):
            for offset in (0, 2, 12, 39):
                with self.subTest(after=after, tag=tag, agent=agent, offset=offset):
                    window = {"offset": offset, "after": after, "tag": tag, "agent": agent}
                    sql, end = self.capture(statements.window_end, codex_id=self.alice_codex.pk, **window)
                    orm_sql, expected = self.capture(orm.search_window_end, self.alice_codex.pk, **window)
                    self.assertEqual(sql, orm_sql)
                    self.assertEqual(end, expected)
        self.assertIsNotNone(statements.window_end(codex_id=self.alice_codex.pk, offset=2))

    def test_a_deferred_column_still_loads_on_access(self) -> None:
        entry = SearchStatements().candidates(codex_id=self.alice_codex.pk, limit=1)[0]
        self.assertIn("content", entry.get_deferred_fields())
        self.assertEqual(entry.content, Entry.objects.get(pk=entry.pk).content)


class StatementsBuiltOncePerShapeTest(NotebookTestCase):
    def test_a_shape_is_rendered_once_whatever_its_values(self) -> None:
        one, two = self.save(tags=["a"]), self.save(tags=["b"])
        statements = SearchStatements()
        with mock.patch.object(
            search_sql._SearchSQL, "render", autospec=True, side_effect=search_sql._SearchSQL.render
        ) as render:
            for tag in ["a", "b", "c"]:
                for limit in (2, 21, 101):
                    statements.candidates(codex_id=self.alice_codex.pk, tag=tag, limit=limit)
            self.assertEqual(render.call_count, 1)
            for after in [one.id, two.id]:
                statements.candidates(codex_id=self.alice_codex.pk, tag="a", after=after, limit=5)
            self.assertEqual(render.call_count, 2)
            statements.candidates(codex_id=self.alice_codex.pk, limit=5, query="abc", prefilter=LIKE)
            statements.candidates(codex_id=self.alice_codex.pk, limit=5, query="xyz", prefilter=LIKE)
            self.assertEqual(render.call_count, 3)

    def test_the_search_renders_a_shape_on_its_first_page_only(self) -> None:
        for number in range(7):
            self.save(content=f"note {number}", tags=["t"])
        render = mock.patch.object(
            search_sql._SearchSQL, "render", autospec=True, side_effect=search_sql._SearchSQL.render
        )
        with mock.patch.object(store, "SEARCH", SearchStatements()), render as rendered:
            first = search(self.alice_codex, tag="t", limit=2)
            self.assertEqual(rendered.call_count, 1)
            second = search(self.alice_codex, tag="t", limit=2, cursor=first.next_cursor)
            self.assertEqual(rendered.call_count, 2)  # a cursor is another shape
            search(self.alice_codex, tag="t", limit=3, cursor=second.next_cursor)
            search(self.alice_codex, tag="u", limit=2)
            self.assertEqual(rendered.call_count, 2)


class InstancesTest(NotebookTestCase):
    def test_a_post_init_receiver_still_sees_every_searched_entry(self) -> None:
        saved = {self.save(content=f"note {number}").id for number in range(3)}
        seen = []

        def receiver(sender, instance, **kwargs) -> None:
            seen.append(instance)

        post_init.connect(receiver, sender=Entry)
        self.addCleanup(post_init.disconnect, receiver, sender=Entry)
        page = search(self.alice_codex, limit=10)
        self.assertEqual({entry.id for entry in page.entries}, saved)
        self.assertEqual({entry.id for entry in seen}, saved)

    def test_entries_are_made_without_init_only_while_nothing_listens(self) -> None:
        columns = ModelColumns(Entry, "e", connection, ("id",))
        self.assertTrue(columns.loads_directly())

        def receiver(sender, instance, **kwargs) -> None:
            pass

        post_init.connect(receiver, sender=Entry)
        self.addCleanup(post_init.disconnect, receiver, sender=Entry)
        self.assertFalse(columns.loads_directly())
