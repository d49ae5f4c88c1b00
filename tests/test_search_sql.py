"""The search's statements built once per shape (notebook.search_sql) against the ORM.

The querysets below are the search's candidate statements as the ORM wrote them before
they were rendered by hand; their plans are the ones docs/data.md describes (checked
with EXPLAIN). For every filter shape, the hand-rendered statement must send the very
same SQL and give the very same instances.
"""

import itertools
import uuid
from typing import Any
from unittest import mock

from django.db import connection
from django.db.models import BigIntegerField, Exists, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast, StrIndex, Substr
from django.db.models.lookups import GreaterThan
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from notebook import search_sql, selectors, services
from notebook.limits import EXCERPT_CHARS
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.rows import ModelColumns
from notebook.search_sql import LIKE, SQLITE_TRIGRAM_MATCH, TRIGRAM, SearchStatements, sqlite_trigram_params
from notebook.validation import parse_entry_input
from notebook.writers import APPLICATION
from tests.base import NotebookTestCase
from tests.test_selectors_search import search

CLIENT_ID = "client-of-the-app"


def orm_candidates(
    codex: Codex,
    *,
    limit: int,
    after: uuid.UUID | None = None,
    upto: uuid.UUID | None = None,
    tag: str | None = None,
    agent: str | None = None,
    written_by: str | None = None,
    query: str = "",
    prefilter: str | None = None,
    search_columns: bool = False,
) -> QuerySet[Entry]:
    """The statement as a queryset (what ``selectors._candidates`` built per call)."""
    candidates = Entry.objects.filter(codex_id=Cast(Value(codex.pk), BigIntegerField()))
    if after is not None:
        candidates = candidates.filter(id__gt=after)
    if upto is not None:
        candidates = candidates.filter(id__lte=upto)
    order = "id"
    for relation, value in [("related_agent_rows", agent), ("tag_rows", tag)]:
        if value is not None:
            bounds = {f"{relation}__codex": codex, f"{relation}__value": value}
            if after is not None:
                bounds[f"{relation}__entry_id__gt"] = after
            if upto is not None:
                bounds[f"{relation}__entry_id__lte"] = upto
            candidates = candidates.filter(**bounds)
            order = f"{relation}__entry_id"
    if written_by is not None:
        revisions = EntryRevision.objects.filter(writer_kind=APPLICATION, writer_client_id=written_by)
        candidates = candidates.filter(Exists(revisions.filter(codex=codex, entry=OuterRef("pk"))))
    if prefilter == TRIGRAM and connection.vendor == "sqlite":
        candidates = candidates.filter(id__in=RawSQL(SQLITE_TRIGRAM_MATCH, sqlite_trigram_params(query)))
    elif prefilter is not None and connection.vendor == "sqlite":
        candidates = candidates.filter(
            GreaterThan(StrIndex("search_title", Value(query)), 0)
            | GreaterThan(StrIndex("search_content", Value(query)), 0)
            | GreaterThan(StrIndex("search_tags_text", Value(query)), 0)
        )
    elif prefilter is not None:
        candidates = candidates.filter(
            Q(search_title__contains=query) | Q(search_content__contains=query) | Q(search_tags_text__contains=query)
        )
    deferred = ["content", "provenance", "search_tags_text"]
    if not search_columns:
        deferred += ["search_title", "search_content", "search_tags"]
    candidates = candidates.defer(*deferred).annotate(excerpt=Substr("content", 1, EXCERPT_CHARS))
    return candidates.order_by(order)[:limit]


def orm_window_end(
    codex: Codex, *, offset: int, after: uuid.UUID | None = None, tag: str | None = None, agent: str | None = None
) -> uuid.UUID | None:
    """The window's end as a queryset (what ``selectors._walk_window_end`` built per call)."""
    rows = Entry.objects.filter(codex=codex)
    column = "id"
    for model, value in [(EntryTag, tag), (EntryRelatedAgent, agent)]:
        if value is not None:
            rows = model.objects.filter(codex=codex, value=value)
            column = "entry_id"
            break
    if after is not None:
        rows = rows.filter(**{f"{column}__gt": after})
    ends = list(rows.order_by(column).values_list(column, flat=True)[offset : offset + 2])
    return ends[0] if len(ends) == 2 else None


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
                        lambda **kwargs: list(orm_candidates(self.alice_codex, **kwargs)), limit=limit, **filters
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
                    orm_sql, expected = self.capture(orm_window_end, self.alice_codex, **window)
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
            search_sql._Database, "render", autospec=True, side_effect=search_sql._Database.render
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
            search_sql._Database, "render", autospec=True, side_effect=search_sql._Database.render
        )
        with mock.patch.object(selectors, "SEARCH", SearchStatements()), render as rendered:
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
