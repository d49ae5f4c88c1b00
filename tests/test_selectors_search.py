import uuid

from notebook import selectors
from notebook.exceptions import InvalidArgument
from notebook.models import Codex, Entry
from notebook.representations import search_page_dict
from notebook.validation import parse_search_params
from tests.base import NotebookTestCase


def search(codex: Codex, **kwargs) -> selectors.SearchPage:
    return selectors.entry_search(codex=codex, params=parse_search_params(**kwargs))


def follow(codex: Codex, **kwargs) -> tuple[list[uuid.UUID], int]:
    """Follow nextCursor to the end; return every id seen (in order) and the page count."""
    seen: list[uuid.UUID] = []
    pages = 0
    cursor = None
    while True:
        page = search(codex, cursor=cursor, **kwargs)
        pages += 1
        seen.extend(entry.id for entry in page.entries)
        if not page.has_more:
            assert page.next_cursor is None
            return seen, pages
        cursor = page.next_cursor


class SearchMatchingTest(NotebookTestCase):
    def ids(self, **kwargs) -> set[uuid.UUID]:
        return {entry.id for entry in search(self.alice_codex, **kwargs).entries}

    def test_nfkc_folds_ligatures(self) -> None:
        entry = self.save(content="a fine plan")
        self.assertEqual(self.ids(query="\ufb01ne"), {entry.id})  # "ﬁne" finds "fine"
        ligature = self.save(content="a \ufb01ne plan")
        self.assertEqual(self.ids(query="FINE"), {entry.id, ligature.id})

    def test_full_case_folding(self) -> None:
        entry = self.save(title="Straße", content="x")
        self.assertEqual(self.ids(query="STRASSE"), {entry.id})
        self.assertEqual(self.ids(query="strasse"), {entry.id})

    def test_it_matches_title_content_or_a_single_tag(self) -> None:
        by_title = self.save(title="Rollback plan", content="x")
        by_content = self.save(content="we need a ROLLBACK")
        by_tag = self.save(content="x", tags=["ops", "rollbacks"])
        self.save(content="unrelated")
        self.assertEqual(self.ids(query="rollback"), {by_title.id, by_content.id, by_tag.id})

    def test_a_match_never_spans_title_and_content(self) -> None:
        self.save(title="alpha", content="beta")
        self.assertEqual(self.ids(query="alphabeta"), set())
        self.assertEqual(self.ids(query="alpha beta"), set())
        self.assertEqual(self.ids(query="alpha\nbeta"), set())

    def test_a_match_never_spans_two_tags(self) -> None:
        self.save(content="x", tags=["red", "blue"])
        for query in ["redblue", "red blue", "red\nblue", "red,blue", "d\nb"]:
            self.assertEqual(self.ids(query=query), set(), query)
        self.assertEqual(len(self.ids(query="blue")), 1)

    def test_tag_filter_is_exact_and_case_sensitive(self) -> None:
        lower = self.save(content="x", tags=["launch"])
        upper = self.save(content="x", tags=["Launch"])
        self.save(content="x", tags=["launches"])
        self.assertEqual(self.ids(tag="launch"), {lower.id})
        self.assertEqual(self.ids(tag="Launch"), {upper.id})

    def test_related_agent_filter_is_exact(self) -> None:
        linked = self.save(content="x", relatedAgentIds=["agent-7", "agent-8"])
        self.save(content="x", relatedAgentIds=["agent-77"])
        self.assertEqual(self.ids(related_agent_id="agent-7"), {linked.id})

    def test_filters_combine_with_and(self) -> None:
        both = self.save(content="deploy notes", tags=["ops"], relatedAgentIds=["a1"])
        self.save(content="deploy notes", tags=["dev"], relatedAgentIds=["a1"])
        self.save(content="other", tags=["ops"], relatedAgentIds=["a1"])
        self.assertEqual(self.ids(query="deploy", tag="ops", related_agent_id="a1"), {both.id})

    def test_search_never_sees_another_codex(self) -> None:
        self.save(codex=self.bob_codex, content="bob's rollback", tags=["ops"])
        self.assertEqual(self.ids(), set())
        self.assertEqual(self.ids(query="rollback"), set())
        self.assertEqual(self.ids(tag="ops"), set())

    def test_summary_has_excerpt_and_byte_count_but_no_content(self) -> None:
        self.save(content="\u20ac" * 200, title="T", provenance={"p": 1})
        data = search_page_dict(search(self.alice_codex))
        summary = data["entries"][0]
        self.assertEqual(summary["excerpt"], "\u20ac" * 160)
        self.assertEqual(summary["contentBytes"], 600)
        self.assertNotIn("content", summary)
        self.assertNotIn("provenance", summary)
        self.assertEqual(data["coverage"]["storage"], "active-only")
        self.assertEqual(data["coverage"]["mode"], "literal-substring-v1")
        self.assertNotIn("nextCursor", data)


class SearchPagingTest(NotebookTestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        # 300 entries; every 7th mentions "needle", every 3rd is tagged "third".
        cls.entries = []
        for i in range(300):
            cls.entries.append(
                NotebookTestCase.save(
                    cls,  # type: ignore[arg-type]
                    content=f"note {i}" + (" needle" if i % 7 == 0 else ""),
                    tags=["third"] if i % 3 == 0 else [],
                )
            )
        cls.all_ids = sorted(entry.id for entry in cls.entries)
        cls.needle_ids = sorted(e.id for i, e in enumerate(cls.entries) if i % 7 == 0)

    def test_results_are_in_id_order(self) -> None:
        page = search(self.alice_codex, limit=50)
        self.assertEqual([e.id for e in page.entries], self.all_ids[:50])
        self.assertEqual([str(e.id) for e in page.entries], sorted(str(e.id) for e in page.entries))

    def test_unfiltered_pages_scan_only_the_page(self) -> None:
        page = search(self.alice_codex, limit=10)
        self.assertEqual((page.scanned, page.has_more, len(page.entries)), (10, True, 10))
        self.assertIsNotNone(page.next_cursor)

    def test_filtered_pages_examine_at_most_100_candidates(self) -> None:
        # A two-character query has no trigram, so every entry is a candidate.
        page = search(self.alice_codex, query="dl", limit=50)
        expected = [e for e in self.all_ids[:100] if e in set(self.needle_ids)]
        self.assertEqual(page.scanned, 100)
        self.assertTrue(page.has_more)
        self.assertEqual([e.id for e in page.entries], expected)
        self.assertLess(len(page.entries), 50)

    def test_a_query_of_three_characters_or_more_examines_only_entries_containing_it(self) -> None:
        page = search(self.alice_codex, query="needle", limit=50)
        self.assertEqual([e.id for e in page.entries], self.needle_ids)
        self.assertEqual((page.scanned, page.has_more, page.next_cursor), (len(self.needle_ids), False, None))

    def test_a_tag_filter_examines_only_entries_with_the_tag(self) -> None:
        page = search(self.alice_codex, tag="third", limit=50)
        self.assertEqual(page.scanned, 50)
        self.assertTrue(all("third" in entry.tags for entry in page.entries))

    def test_filtered_pages_stop_early_once_limit_matches(self) -> None:
        page = search(self.alice_codex, query="dl", limit=2)
        self.assertEqual(len(page.entries), 2)
        self.assertEqual(page.scanned, self.all_ids.index(page.entries[1].id) + 1)
        self.assertTrue(page.has_more)

    def test_a_filtered_page_may_be_empty_with_a_cursor(self) -> None:
        page = search(self.alice_codex, query="qq", limit=5)
        self.assertEqual((page.entries, page.scanned, page.has_more), ([], 100, True))
        self.assertIsNotNone(page.next_cursor)
        second = search(self.alice_codex, query="qq", cursor=page.next_cursor)
        third = search(self.alice_codex, query="qq", cursor=second.next_cursor)
        self.assertEqual((third.scanned, third.has_more, third.next_cursor), (100, False, None))

    def test_a_query_no_entry_contains_examines_nothing(self) -> None:
        page = search(self.alice_codex, query="no such text anywhere", limit=5)
        self.assertEqual((page.entries, page.scanned, page.has_more, page.next_cursor), ([], 0, False, None))

    def test_following_cursors_yields_every_match_exactly_once(self) -> None:
        for kwargs, expected in [
            ({}, self.all_ids),
            ({"limit": 7}, self.all_ids),
            ({"query": "needle", "limit": 3}, self.needle_ids),
            ({"query": "dl", "limit": 3}, self.needle_ids),
            ({"query": "NEEDLE", "limit": 50}, self.needle_ids),
            ({"tag": "third", "limit": 13}, sorted(e.id for i, e in enumerate(self.entries) if i % 3 == 0)),
            (
                {"tag": "third", "query": "needle"},
                sorted(e.id for i, e in enumerate(self.entries) if i % 21 == 0),
            ),
        ]:
            with self.subTest(**kwargs):
                seen, _ = follow(self.alice_codex, **kwargs)
                self.assertEqual(seen, expected)

    def test_limit_may_change_between_pages(self) -> None:
        first = search(self.alice_codex, query="needle", limit=2)
        second = search(self.alice_codex, query="needle", limit=5, cursor=first.next_cursor)
        self.assertEqual([e.id for e in first.entries + second.entries], self.needle_ids[:7])

    def test_a_tampered_cursor_is_invalid_argument(self) -> None:
        cursor = search(self.alice_codex, limit=5).next_cursor
        assert cursor is not None
        tampered = cursor[:-1] + ("A" if cursor[-1] != "A" else "B")
        for bad in [tampered, "not-a-cursor", cursor + "x", "x" + cursor]:
            with self.assertRaises(InvalidArgument):
                search(self.alice_codex, cursor=bad)

    def test_a_cursor_from_another_codex_is_invalid_argument(self) -> None:
        self.save(codex=self.bob_codex, content="bob")
        cursor = search(self.alice_codex, limit=5).next_cursor
        with self.assertRaises(InvalidArgument) as caught:
            search(self.bob_codex, cursor=cursor)
        self.assertIn("cursor", caught.exception.message)

    def test_a_cursor_with_changed_filters_is_invalid_argument(self) -> None:
        cursor = search(self.alice_codex, query="needle", tag="third", limit=1).next_cursor
        for changed in [
            {"query": "needles", "tag": "third"},
            {"query": "needle"},
            {"tag": "third"},
            {"query": "needle", "tag": "third", "related_agent_id": "x"},
        ]:
            with self.subTest(**changed), self.assertRaises(InvalidArgument):
                search(self.alice_codex, cursor=cursor, **changed)
        # Unchanged filters (and a new limit) are fine.
        search(self.alice_codex, query="needle", tag="third", limit=9, cursor=cursor)

    def test_entries_deleted_by_cascade_do_not_break_a_cursor(self) -> None:
        page = search(self.alice_codex, limit=5)
        Entry.objects.filter(id=page.entries[-1].id).delete()
        rest = search(self.alice_codex, limit=5, cursor=page.next_cursor)
        self.assertEqual([e.id for e in rest.entries], self.all_ids[5:10])
