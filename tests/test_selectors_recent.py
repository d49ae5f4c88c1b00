"""Newest-first listing for the person's pages: the tool's matching, keyset paging on
(updated_at, id), and a signed cursor bound to codex and filters."""

from notebook.exceptions import InvalidArgument
from notebook.models import Entry
from notebook.selectors import entry_recent
from notebook.validation import parse_search_params
from tests.base import NotebookTestCase


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
            Entry.objects.filter(codex=self.alice_codex).order_by("-updated_at", "-id").values_list("id", flat=True)
        )
        self.assertEqual(ids, expected)
        self.assertEqual(sizes, [5, 5, 5, 5, 3])

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
