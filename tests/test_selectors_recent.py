"""Newest-first listing for the person's pages: the tool's matching, keyset paging on
(updated_at, write_seq), and a signed cursor bound to codex and filters."""

import datetime as dt
from unittest import mock

from notebook import services
from notebook.exceptions import InvalidArgument
from notebook.models import Entry
from notebook.selectors import entry_recent
from notebook.validation import parse_entry_input, parse_search_params
from tests.base import NotebookTestCase

# One millisecond for every write of a test: saves are truncated to the millisecond, so
# writes this close tie on updated_at and only the write order can tell them apart.
ONE_MILLISECOND = dt.datetime(2026, 3, 1, 12, 0, 0, 123000, tzinfo=dt.UTC)


class EntryRecentTest(NotebookTestCase):
    def follow(self, max_scanned: int = 1000, **filters) -> tuple[list, list[int]]:
        ids, sizes, cursor = [], [], None
        while True:
            params = parse_search_params(limit=5, cursor=cursor, **filters)
            page = entry_recent(codex=self.alice_codex, params=params, max_scanned=max_scanned)
            ids += [entry.id for entry in page.entries]
            sizes.append(len(page.entries))
            if page.next_cursor is None:
                return ids, sizes
            cursor = page.next_cursor

    def test_it_pages_newest_first_through_every_entry_once(self) -> None:
        for i in range(23):
            self.save(content=f"n{i}")
        ids, sizes = self.follow()
        expected = list(
            Entry.objects.filter(codex=self.alice_codex)
            .order_by("-updated_at", "-write_seq")
            .values_list("id", flat=True)
        )
        self.assertEqual(ids, expected)
        self.assertEqual(sizes, [5, 5, 5, 5, 3])

    def test_writes_in_one_millisecond_keep_the_order_they_were_made_in(self) -> None:
        with mock.patch.object(services, "_now", return_value=ONE_MILLISECOND):
            # Twelve saves: random ids agree with the write order by chance once in 12!.
            saved = [self.save(content=f"same moment {i}") for i in range(12)]
            first = saved[0]
            updated = services.entry_update(
                codex=self.alice_codex,
                entry_id=first.id,
                expected_revision=1,
                data=parse_entry_input({"content": "changed last"}),
            )
        self.assertEqual({entry.updated_at for entry in [*saved, updated]}, {ONE_MILLISECOND})
        newest_first = [updated.id] + [entry.id for entry in reversed(saved[1:])]
        self.assertEqual(self.follow()[0], newest_first)

    def test_a_rare_match_beyond_the_scan_budget_is_reached_by_following_the_cursor(self) -> None:
        rare = self.save(content="the one STRAẞE")
        for i in range(250):
            self.save(content=f"filler {i}")
        # "ß" folds to "ss": under 3 characters, no trigram index narrows the candidates.
        ids, sizes = self.follow(max_scanned=100, query="ß")
        self.assertEqual(ids, [rare.id])
        self.assertEqual(sizes[0], 0)  # an empty page with a cursor is normal

    def test_a_rare_word_of_three_or_more_characters_is_on_the_first_page(self) -> None:
        rare = self.save(content="the one STRAẞE")
        for i in range(250):
            self.save(content=f"filler {i}")
        ids, sizes = self.follow(max_scanned=100, query="straße")
        self.assertEqual((ids, sizes), ([rare.id], [1]))  # the trigram index narrows the candidates

    def test_filters_are_the_tools_and_never_reach_another_codex(self) -> None:
        tagged = self.save(content="x", tags=["Launch"], relatedAgentIds=["a"])
        self.save(content="y", tags=["launch"])
        self.save(self.bob_codex, content="x", tags=["Launch"], relatedAgentIds=["a"])
        self.assertEqual(self.follow(tag="Launch")[0], [tagged.id])
        self.assertEqual(self.follow(related_agent_id="a")[0], [tagged.id])

    def test_a_cursor_is_bound_to_its_codex_and_filters(self) -> None:
        for i in range(7):
            self.save(content=f"plan {i}")
        page = entry_recent(codex=self.alice_codex, params=parse_search_params(query="plan", limit=2))
        for codex, query in [(self.bob_codex, "plan"), (self.alice_codex, "pla"), (self.alice_codex, "plan")]:
            cursor = page.next_cursor if codex is not self.alice_codex or query != "plan" else page.next_cursor + "x"
            with self.subTest(query=query), self.assertRaises(InvalidArgument):
                entry_recent(codex=codex, params=parse_search_params(query=query, limit=2, cursor=cursor))
