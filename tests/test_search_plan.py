"""A query's candidate plan (notebook.search_plan): the walk or the trigram index, chosen from
a sample, at every density, with the same results either way."""

import contextlib
import itertools
import math
import unittest
import uuid
from unittest import mock

from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from notebook import orm, search_plan, services
from notebook.models import Codex, Entry
from notebook.prefilters import LIKE, PG_TRIGRAM_KEYS, TRIGRAM
from notebook.validation import normalize_for_search, parse_entry_input
from tests.base import NotebookTestCase
from tests.test_selectors_search import follow, search

WORD = "quokka"


def listed(codex: Codex, pages: int, **filters) -> list[uuid.UUID]:
    """Every id a search lists, following its cursor for at most ``pages`` pages (a cursor
    that stopped moving on would go on for ever)."""
    seen: list[uuid.UUID] = []
    cursor = None
    for _ in range(pages):
        page = search(codex, cursor=cursor, **filters)
        seen.extend(entry.id for entry in page.entries)
        if page.next_cursor is None:
            return seen
        cursor = page.next_cursor
    raise AssertionError(f"still more after {pages} pages: {seen}")


def trigram_lookups(captured: CaptureQueriesContext) -> list[str]:
    """The statements that asked the trigram index (SQLite's FTS5 table; PostgreSQL's step
    with index scans disabled)."""
    return [q["sql"] for q in captured if "notebook_entry_trigram " in q["sql"] or "enable_indexscan" in q["sql"]]


def walks(captured: CaptureQueriesContext) -> list[str]:
    """The walk's statements: candidates tested one by one for the substring."""
    test = "INSTR(" if connection.vendor == "sqlite" else "STRPOS("
    return [q["sql"] for q in captured if test in q["sql"] and "notebook_entry_trigram " not in q["sql"]]


class TheRuleTest(unittest.TestCase):
    def test_a_sample_is_about_the_square_root_of_the_codex_within_bounds(self) -> None:
        self.assertEqual(search_plan.sample_size(10_000, 21), 100)
        self.assertEqual(search_plan.sample_size(100, 21), 84)  # four pages' worth at least
        self.assertEqual(search_plan.sample_size(10**8, 21), search_plan.SAMPLE_MAX)
        self.assertEqual(search_plan.sample_size(0, 21), 84)

    def test_the_cheaper_way_wins_at_each_density_of_a_10000_entry_codex(self) -> None:
        # What a sample of 100 finds on average at each density, and the page's 21st candidate.
        chosen = {}
        for share in (0.0001, 0.001, 0.01, 0.1, 0.2):
            found = round(100 * share)
            chosen[share] = search_plan.walk_window(found=found, needed=21 - found, sample=100, entries=10_000)
        self.assertEqual([chosen[share] for share in (0.0001, 0.001, 0.01)], [None, None, None])
        # 10 %: 11 more in about 110 entries, against some 1,000 matches from the index.
        self.assertEqual(chosen[0.1], math.ceil(search_plan.WALK_MARGIN * 110))
        self.assertEqual(chosen[0.2], math.ceil(search_plan.WALK_MARGIN * 5))

    def test_the_choice_is_the_lower_of_the_two_expected_costs(self) -> None:
        for found in range(0, 21):
            for entries in (100, 1_000, 10_000, 1_000_000):
                sample = search_plan.sample_size(entries, 21)
                with self.subTest(found=found, entries=entries):
                    window = search_plan.walk_window(found=found, needed=21 - found, sample=sample, entries=entries)
                    if found == 0:
                        self.assertIsNone(window)
                        continue
                    walk = (21 - found) * sample / found
                    index = search_plan.INDEX_MATCH_COST * found * entries / sample
                    self.assertEqual(window is None, walk > index)
                    if window is not None:
                        self.assertGreaterEqual(window, walk)


class BothBranchesTest(NotebookTestCase):
    """A codex of 120 entries, all tagged ``all``: the word in every one of them (``quokka``),
    or in one (``wombat``). With a tag the sample's entries are counted, not estimated, so
    what each sample finds, and so the branch, is certain."""

    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        for number in range(120):
            content = f"{WORD} note {number}" + (" and a wombat" if number == 60 else "")
            services.entry_save(
                codex=cls.alice_codex,
                request_id=f"n{number}",
                data=parse_entry_input({"content": content, "tags": ["all"]}),
            )
        services.entry_save(
            codex=cls.bob_codex, request_id="other", data=parse_entry_input({"content": f"{WORD} wombat"})
        )
        cls.ids = list(Entry.objects.filter(codex=cls.alice_codex).order_by("id").values_list("id", flat=True))
        cls.wombat = Entry.objects.get(codex=cls.alice_codex, content__contains="wombat").id

    def setUp(self) -> None:
        super().setUp()
        self.alice_codex.refresh_from_db()  # the entry count the plan reads

    def test_a_common_word_walks_on_after_the_sample_and_never_asks_the_index(self) -> None:
        # A sample of 10 finds 10; 11 more are expected in 11 entries, against 120 matches.
        with mock.patch.object(search_plan, "SAMPLE_MAX", 10), CaptureQueriesContext(connection) as captured:
            page = search(self.alice_codex, query=WORD, tag="all", limit=20)
        self.assertEqual([entry.id for entry in page.entries], self.ids[:20])
        self.assertEqual(len(walks(captured)), 2)  # the sample, then on
        self.assertEqual(trigram_lookups(captured), [])
        seen, _ = follow(self.alice_codex, query=WORD, tag="all", limit=20)
        self.assertEqual(seen, self.ids)

    def test_a_rare_word_asks_the_index_after_the_sample(self) -> None:
        # A sample of 10 finds at most the one; 20 more would take some 200 entries, against
        # about 12 matches from the index.
        with mock.patch.object(search_plan, "SAMPLE_MAX", 10), CaptureQueriesContext(connection) as captured:
            page = search(self.alice_codex, query="wombat", tag="all", limit=20)
        self.assertEqual([entry.id for entry in page.entries], [self.wombat])
        self.assertFalse(page.has_more)
        self.assertEqual(len(walks(captured)), 1)  # the sample alone
        self.assertTrue(trigram_lookups(captured))

    def test_without_a_tag_the_sample_of_a_common_word_fills_the_page_in_one_statement(self) -> None:
        # The sample's end is estimated: about 84 of the 120 entries (four pages' worth).
        with CaptureQueriesContext(connection) as captured:
            page = search(self.alice_codex, query=WORD, limit=20)
        self.assertEqual([entry.id for entry in page.entries], self.ids[:20])
        self.assertEqual(len(walks(captured)), 1)
        self.assertEqual(trigram_lookups(captured), [])

    def test_without_a_tag_a_rare_word_walks_the_sample_only(self) -> None:
        with CaptureQueriesContext(connection) as captured:
            page = search(self.alice_codex, query="wombat", limit=20)
        self.assertEqual([entry.id for entry in page.entries], [self.wombat])
        self.assertEqual(len(walks(captured)), 1)
        self.assertIn('"notebook_entry"."id" <=', walks(captured)[0])  # bounded: not the whole codex
        self.assertTrue(trigram_lookups(captured))


class CandidatePlansTest(NotebookTestCase):
    """What the database does with the plan's statements (their plans, not their speed)."""

    def explain(self, **filters) -> str:
        found, order = orm.candidates(self.alice_codex.pk, **filters)
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                # The index step's settings: a walk that an index could serve would show it.
                cursor.execute("SET LOCAL enable_indexscan = off")
                cursor.execute("SET LOCAL enable_seqscan = off")
            return found.order_by(order)[:21].explain()

    def test_the_walk_is_a_test_no_trigram_index_serves(self) -> None:
        self.save(content=f"a {WORD}")
        plan = self.explain(query=WORD, prefilter=LIKE, after=uuid.UUID(int=1), upto=uuid.UUID(int=2**127))
        self.assertNotIn("_trgm", plan)
        self.assertNotIn("notebook_entry_trigram", plan)

    @unittest.skipUnless(connection.vendor == "postgresql", "PostgreSQL's trigram step")
    def test_the_trigram_step_tests_a_tag_and_agent_on_each_match_never_joining_their_rows(self) -> None:
        # Joined, a common tag's index rows were all read into a hash to meet a rare word's
        # few matches (the planner judges the word by the whole table).
        self.save(content=f"a {WORD}", tags=["t"], relatedAgentIds=["agent-1"])
        for filters in [{"tag": "t"}, {"agent": "agent-1"}, {"tag": "t", "agent": "agent-1"}]:
            with self.subTest(**filters):
                plan = self.explain(query=WORD, prefilter=TRIGRAM, after=uuid.UUID(int=1), **filters)
                self.assertNotIn("notebook_entrytag", plan)
                self.assertNotIn("notebook_entryrelatedagent", plan)
                self.assertNotIn("Join", plan)
                self.assertNotIn("Nested Loop", plan)

    @unittest.skipUnless(connection.vendor == "postgresql", "PostgreSQL's trigram step")
    def test_the_trigram_steps_keys_are_written_as_the_index_has_them(self) -> None:
        # Written otherwise, no index could serve the step. The condition alone, with
        # sequential and index scans off (a btree's full scan could stand in for a sequential
        # one): a bitmap scan of an index that serves it is the one plan left, whatever the
        # costs. (Which of the codex's indexes serves the whole statement is the planner's
        # choice by their sizes.)
        self.save(content=f"a {WORD}")
        table = connection.ops.quote_name(Entry._meta.db_table)
        keys = RawSQL(PG_TRIGRAM_KEYS.format(table=table), [self.alice_codex.pk, WORD], output_field=BooleanField())
        with transaction.atomic(), connection.cursor() as cursor:
            for scan in ("seqscan", "indexscan", "indexonlyscan"):
                cursor.execute(f"SET LOCAL enable_{scan} = off")
            plan = Entry.objects.filter(keys).explain()
        self.assertIn("Bitmap Index Scan on notebook_entry_trigram_keys", plan)

    @unittest.skipUnless(connection.vendor == "sqlite", "SQLite's FTS5 lookup")
    def test_past_a_cursor_sqlite_looks_up_the_matches_instead_of_walking_the_codex(self) -> None:
        self.save(content=f"a {WORD}")
        plan = self.explain(query=WORD, prefilter=TRIGRAM, after=uuid.UUID(int=1))
        # Each match looked up by codex and id (notebook_entry_unique_per_codex), never a range
        # of the codex from the cursor.
        self.assertRegex(plan, r"SEARCH notebook_entry USING INDEX \S+ \(codex_id=\? AND id=\?\)")
        self.assertNotIn("(codex_id=? AND id>?)", plan)
        # The entries waiting for their batch, named by their codex too, are looked up by id
        # from the few waiting keys, never found by walking the codex.
        self.assertRegex(plan, r"SEARCH e USING INDEX \S+ \(id=\?\)")
        self.assertNotIn("(codex_id=?)", plan)


# No shrinking: each example searches two dozen ways, and the failing one says which.
EXAMPLES = settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
PLAIN = override_settings(CODEX_FAST_PATH=False)


class PlansAgreeAtEveryDensityTest(TestCase):
    """Random codexes and a word held by a random share of them, searched under each plan
    setting (a sample of no entry, or a few; the walk or the index always preferred after
    it; stretches too short to fill a page, or long enough): following the cursor lists
    exactly the entries that hold the word, in id order, each once, on the fast path and the
    plain ORM alike."""

    @classmethod
    def setUpTestData(cls) -> None:
        cls.codex = services.codex_for_user(user=get_user_model().objects.create(username="dee"))

    @EXAMPLES
    @given(holds=st.lists(st.booleans(), min_size=1, max_size=30), tagged=st.booleans())
    def test_every_plan_lists_exactly_the_holders(self, holds: list[bool], tagged: bool) -> None:
        Entry.objects.filter(codex=self.codex).delete()
        for number, held in enumerate(holds):
            content = f"note {number}" + (f" with a {WORD}" if held else "")
            data = parse_entry_input({"content": content, "tags": ["odd"] if number % 2 else []})
            services.entry_save(codex=self.codex, request_id=f"r{number}", data=data)
        # The entry count the plan reads (the quota's, which deleting rows leaves as it was).
        Codex.objects.filter(pk=self.codex.pk).update(entry_count=len(holds))
        self.codex.refresh_from_db()
        filters = {"tag": "odd"} if tagged else {}
        expected = [
            entry.id
            for entry in Entry.objects.filter(codex=self.codex).order_by("id")
            if WORD in entry.content and (not tagged or "odd" in entry.tags)
        ]
        for sample, index_cost, margin, limit in itertools.product([0, 2, 5], [0.0, math.inf], [0.05, 2.0], [1, 4]):
            with contextlib.ExitStack() as plan:
                plan.enter_context(mock.patch.object(search_plan, "SAMPLE_MAX", sample))
                plan.enter_context(mock.patch.object(search_plan, "INDEX_MATCH_COST", index_cost))
                plan.enter_context(mock.patch.object(search_plan, "WALK_MARGIN", margin))
                setting = f"sample={sample} index_cost={index_cost} margin={margin} limit={limit}"
                pages = len(holds) + 2
                self.assertEqual(listed(self.codex, pages, query=WORD, limit=limit, **filters), expected, setting)
                with PLAIN:
                    plain = listed(self.codex, pages, query=WORD, limit=limit, **filters)
                self.assertEqual(plain, expected, setting)


# Text as the search columns hold it: letters, digits, separators and multibyte characters
# (which pg_trgm hashes), normalized as a save normalizes them.
SEARCHED_TEXT = st.text(alphabet=st.sampled_from("abcxyz019 -_.,'\néßøЖж日本語🙂"), max_size=40).map(
    normalize_for_search
)


@unittest.skipUnless(connection.vendor == "postgresql", "PostgreSQL's codex trigram keys (migration 0009)")
class CodexTrigramKeysTest(TestCase):
    """Every text that holds a query as a substring has all the query's keys in its own
    codex, in whichever searched column it is, and none in another codex."""

    def holds_keys(self, codex: int, columns: tuple[str, str, str], query_codex: int, query: str) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT notebook_entry_trigram_keys(%s, %s, %s, %s) @> notebook_query_trigram_keys(%s, %s)",
                [codex, *columns, query_codex, query],
            )
            return cursor.fetchone()[0]

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=SEARCHED_TEXT, data=st.data())
    def test_a_text_has_the_keys_of_each_of_its_substrings(self, text: str, data: st.DataObject) -> None:
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, len(text)))
        query = text[start:end]
        column = data.draw(st.integers(0, 2))
        columns = tuple(text if n == column else "other" for n in range(3))
        self.assertTrue(self.holds_keys(5, columns, 5, query), (text, query))
        self.assertFalse(self.holds_keys(6, columns, 5, query), (text, query))

    def test_a_query_padded_at_its_edges_asks_for_no_word_edge(self) -> None:
        # Each query's start and end may fall inside a word of the text; a separator inside
        # the query is a word edge of the text too.
        for text, query in [
            ("xfooy", "foo"),
            ("barfoo", "foo"),
            ("xaa-b-ccx", "a-b-c"),
            ("cafés", "café"),
            ("the foo bar", "foo b"),
        ]:
            with self.subTest(text=text, query=query):
                self.assertTrue(self.holds_keys(5, ("", text, ""), 5, query))
        self.assertFalse(self.holds_keys(5, ("", "xfoo", ""), 5, "x-foo"))
