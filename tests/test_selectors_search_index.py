"""The index-backed search (migration 0002) against a plain scan on random data.

A plain scan is the definition: every entry of the codex in id order, matched in
Python. The index only narrows candidates, so following cursors must list exactly
the plain scan's matches, in the same order, each once, whatever the query.
"""

import importlib
import random
import unittest
import uuid
from typing import Any
from unittest import mock

from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from notebook import search_plan, services
from notebook.models import Entry
from notebook.prefilters import SQLITE_TRIGRAM_MATCH, sqlite_trigram_params
from notebook.selectors import TRIGRAM_MIN_CHARS
from notebook.validation import normalize_for_search, parse_entry_input
from tests.base import NotebookTestCase
from tests.test_selectors_search import follow, search

BATCH = importlib.import_module("notebook.migrations.0007_trigram_batches").BATCH

# Pieces that NFKC or case folding change (ﬁ -> fi, ß -> ss, İ -> i̇, Ⅻ -> xii,
# full-width letters), LIKE's metacharacters, FTS5's quote, and plain words.
PIECES = [
    "\ufb01",
    "fi",
    "FI",
    "\u00df",
    "SS",
    "ss",
    "\u0130",
    "i\u0307",
    "I",
    "\u216b",
    "xii",
    "\uff21\uff22",
    "ab",
    "%",
    "_",
    "\\",
    "\\%",
    '"',
    "'",
    "*",
    " ",
    "needle",
    "Needle",
    "hay",
    "caf\u00e9",
    "cafe\u0301",
    "\u00e9",
    "-",
    "or",
    "NEAR",
]

# Queries that stress the prefilter in particular.
FIXED_QUERIES = [
    "%",
    "_",
    "\\",
    "%_",
    "\\%",
    "a%b",
    "a_b",
    "100%",
    '"',
    '""',
    '"needle"',
    "'",
    "*",
    "\ufb01",
    "FI",
    "fi",
    "\u00df",
    "SS",
    "STRASSE",
    "\u0130",
    "i\u0307",
    "\u216b",
    "XII",
    "\uff21",
    "a",
    "ab",
    "AB",
    " ",
    "  ",
    "needle",
    "NEEDLE hay",
    "caf\u00e9",
    "cafe\u0301",
    "or NEAR",
    "hay\nneedle",
    "needle hay needle hay",
    "zzz-not-there",
    "\x00",
    "nee\x00dle",
    "needle\x00",
    "\t",
    "hay\tneedle",
    "\x1f\x7f\x9f",
]


def random_text(rng: random.Random, pieces: int) -> str:
    return "".join(rng.choice(PIECES) for _ in range(pieces))


def random_content(rng: random.Random, pieces: int) -> str:
    """Like ``random_text``, with the tabs and newlines content (unlike titles and tags) may hold."""
    return "".join(rng.choice(PIECES) + rng.choice(["", "", "", "\t", "\n"]) for _ in range(pieces))


def plain_scan(entries: list[Entry], query: str) -> list[uuid.UUID]:
    """The entries (a codex's, in id order) whose one field or one tag contains the query."""
    needle = normalize_for_search(query)
    matches = []
    for entry in entries:
        texts = [normalize_for_search(entry.title or ""), normalize_for_search(entry.content)]
        texts += [normalize_for_search(tag) for tag in entry.tags]
        if any(needle in text for text in texts):
            matches.append(entry.id)
    return matches


def _varint(data: bytes) -> int:
    """The first of SQLite's variable-length integers in ``data`` (FTS5 writes its counts so)."""
    value = 0
    for position, byte in enumerate(data[:9]):
        if position == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            break
    return value


def fts_holds(phrase: str) -> set[str]:
    """SQLite: entry ids (hex) the FTS5 table alone holds for a phrase."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k.entry_id FROM notebook_entry_trigram_key k WHERE k.rowid IN (SELECT rowid FROM "
            "notebook_entry_trigram WHERE notebook_entry_trigram MATCH %s)",
            ['"' + phrase + '"'],
        )
        return {row[0] for row in cursor.fetchall()}


class FtsCoverage:
    """SQLite: what the FTS5 trigram table covers, checked against its own bookkeeping."""

    def fts_coverage(self: Any) -> tuple[set[str], set[str]]:
        """Entry ids (hex) the FTS5 table covers and those waiting for their batch. Checks
        that every entry has a key row, that the table holds a document for exactly the
        covered ones, and that its own count of documents agrees (a contentless table told
        to delete a row it never held would lower that count, and nothing else would show it)."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexed FROM notebook_entry_trigram_state")
            (indexed,) = cursor.fetchone()
            cursor.execute("SELECT rowid, entry_id FROM notebook_entry_trigram_key")
            keys = dict(cursor.fetchall())
            cursor.execute("SELECT id FROM notebook_entry_trigram_docsize")
            documents = {row[0] for row in cursor.fetchall()}
            cursor.execute("SELECT block FROM notebook_entry_trigram_data WHERE id = 1")
            averages = cursor.fetchone()
        self.assertEqual(set(keys.values()), {entry_id.hex for entry_id in Entry.objects.values_list("id", flat=True)})
        self.assertEqual(documents, {rowid for rowid in keys if rowid <= indexed})
        self.assertEqual(_varint(averages[0]) if averages else 0, len(documents))
        covered = {entry_id for rowid, entry_id in keys.items() if rowid <= indexed}
        return covered, set(keys.values()) - covered


class IndexedSearchAgreesWithPlainScanTest(FtsCoverage, NotebookTestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        super().setUpTestData()
        rng = random.Random(8)
        cls.rng_queries = []
        entries = []
        for i in range(240):
            tags = list(dict.fromkeys(random_text(rng, rng.randint(1, 3)) for _ in range(rng.randint(0, 3))))
            entry = {"content": random_content(rng, rng.randint(1, 12)), "tags": tags}
            if rng.random() < 0.6:
                entry["title"] = random_text(rng, rng.randint(1, 4))
            entries.append(
                services.entry_save(codex=cls.alice_codex, request_id=f"r{i}", data=parse_entry_input(entry))
            )
            # Bob's codex holds the same words; they must never show up in Alice's results.
            services.entry_save(codex=cls.bob_codex, request_id=f"r{i}", data=parse_entry_input(entry))
        # Edits and deletions must reach the index (triggers on SQLite), made to entries the
        # FTS5 table already covers and, on SQLite, to entries still waiting for their batch
        # (migration 0007): the later ones below, some of which a batch then covers.
        later = [cls.save_random(rng, f"later{i}") for i in range(BATCH // 2)]
        cls.change_random(rng, entries[:40] + later[:5], entries[40:60] + later[5:8])
        latest = [cls.save_random(rng, f"latest{i}") for i in range(BATCH)]
        cls.change_random(rng, latest[-6:-3], latest[-3:-1])
        # Random substrings of stored text, as agents would search for.
        for entry in Entry.objects.filter(codex=cls.alice_codex).order_by("?")[:40]:
            text = rng.choice([entry.content, *(entry.tags or [entry.content])])
            start = rng.randrange(len(text))
            cls.rng_queries.append(text[start : start + rng.randint(1, 6)])

    @classmethod
    def save_random(cls, rng: random.Random, request_id: str) -> Entry:
        entry = {"content": random_content(rng, rng.randint(1, 12)), "tags": [random_text(rng, 2)]}
        return services.entry_save(codex=cls.alice_codex, request_id=request_id, data=parse_entry_input(entry))

    @classmethod
    def change_random(cls, rng: random.Random, updated: list[Entry], deleted: list[Entry]) -> None:
        for entry in updated:
            replacement = {"content": random_content(rng, rng.randint(1, 8)), "tags": [random_text(rng, 2)]}
            services.entry_update(
                codex=cls.alice_codex,
                entry_id=entry.id,
                expected_revision=entry.revision,
                data=parse_entry_input(replacement),
            )
        Entry.objects.filter(id__in=[entry.id for entry in deleted]).delete()

    @unittest.skipUnless(connection.vendor == "sqlite", "the batches are SQLite's")
    def test_the_data_has_entries_on_both_sides_of_the_batches(self) -> None:
        covered, waiting = self.fts_coverage()
        self.assertGreater(len(covered), 400)
        self.assertTrue(1 <= len(waiting) < BATCH, len(waiting))

    def assert_agrees(self, query: str, **filters) -> None:
        entries = list(Entry.objects.filter(codex=self.alice_codex).order_by("id"))
        if "tag" in filters:
            entries = [entry for entry in entries if filters["tag"] in entry.tags]
        expected = plain_scan(entries, query)
        for limit in (3, 50):
            seen, _ = follow(self.alice_codex, query=query, limit=limit, **filters)
            self.assertEqual(seen, expected, f"query={query!r} limit={limit} {filters}")

    def test_fixed_queries_list_exactly_the_plain_scans_matches(self) -> None:
        for query in FIXED_QUERIES:
            with self.subTest(query=query):
                self.assert_agrees(query)

    def test_random_substrings_list_exactly_the_plain_scans_matches(self) -> None:
        for query in self.rng_queries:
            with self.subTest(query=query):
                self.assert_agrees(query)

    def test_a_query_with_a_tag_lists_exactly_the_plain_scans_matches(self) -> None:
        tag = next(t for e in Entry.objects.filter(codex=self.alice_codex).order_by("id") for t in e.tags)
        for query in ["%", "ss", "needle", tag[:3], tag]:
            with self.subTest(query=query):
                self.assert_agrees(query, tag=tag)

    def test_every_returned_entry_matches_and_pages_are_in_id_order(self) -> None:
        for query in ["fi", "ss", "needle", "%", "\\"]:
            page = search(self.alice_codex, query=query, limit=50)
            needle = normalize_for_search(query)
            ids = [entry.id for entry in page.entries]
            self.assertEqual(ids, sorted(ids))
            for entry in page.entries:
                self.assertTrue(
                    needle in entry.search_title
                    or needle in entry.search_content
                    or any(needle in tag for tag in entry.search_tags),
                    (query, entry.id),
                )

    def test_a_long_query_examines_only_entries_that_contain_it(self) -> None:
        for query in ["needle", "\ufb01ne", "\u00df\u00df", "%_%"]:
            needle = normalize_for_search(query)
            self.assertGreaterEqual(len(needle), TRIGRAM_MIN_CHARS)
            page = search(self.alice_codex, query=query, limit=50)
            # Narrowed candidates: every examined entry really contains the query
            # (a superset only ever adds entries whose tags it spans, and these do not).
            self.assertEqual(page.scanned, len(page.entries), query)


class IndexedSearchPastTheSampleTest(IndexedSearchAgreesWithPlainScanTest):
    """The same, with a sample of a few entries and the index always chosen after it, so
    that the trigram indexes alone (on PostgreSQL with index scans disabled) serve most
    candidates."""

    def setUp(self) -> None:
        super().setUp()
        self.enterContext(mock.patch.object(search_plan, "SAMPLE_MAX", 3))
        self.enterContext(mock.patch.object(search_plan, "INDEX_MATCH_COST", 0.0))
        # The window's end is estimated from the codex's entry count, which the token check
        # reads fresh on every call (the class's instance still says 0).
        self.alice_codex.refresh_from_db()
        self.assertGreater(self.alice_codex.entry_count, 3)

    def test_without_a_tag_the_window_end_is_estimated_not_counted(self) -> None:
        with CaptureQueriesContext(connection) as captured:
            search(self.alice_codex, query="needle", limit=50)
        self.assertFalse([query["sql"] for query in captured if "OFFSET" in query["sql"]])
        with CaptureQueriesContext(connection) as captured:
            search(self.alice_codex, query="needle", tag="x", limit=50)
        self.assertTrue([query["sql"] for query in captured if "OFFSET" in query["sql"]])

    @unittest.skipUnless(connection.vendor == "postgresql", "planner settings are PostgreSQL's")
    def test_the_second_step_runs_and_leaves_the_planner_as_it_was(self) -> None:
        with CaptureQueriesContext(connection) as captured:
            page = search(self.alice_codex, query="needle", limit=50)
        self.assertTrue(page.entries)
        self.assertTrue(any("set_config('enable_indexscan', 'off'" in query["sql"] for query in captured))
        # The tests run inside a transaction, as a caller's may: the settings are back.
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('enable_indexscan'), current_setting('enable_seqscan')")
            self.assertEqual(cursor.fetchone(), ("on", "on"))


class IndexedSearchWalkingOnPastTheSampleTest(IndexedSearchPastTheSampleTest):
    """The same, with the walk always chosen after the sample when it found anything, over
    stretches too short to fill a page, so that each page walks on and the index gives what
    the stretch left out."""

    def setUp(self) -> None:
        super().setUp()
        self.enterContext(mock.patch.object(search_plan, "INDEX_MATCH_COST", float("inf")))
        self.enterContext(mock.patch.object(search_plan, "WALK_MARGIN", 0.05))


class IndexedSearchWithAMiscountedCodexTest(IndexedSearchPastTheSampleTest):
    """The same, with an entry count far off the truth: the estimated window is then far too
    small (a window of one id in a million), which costs time but never a match."""

    def setUp(self) -> None:
        super().setUp()
        self.alice_codex.entry_count = 3 * 10**6


class TrigramPrefilterSupersetTest(NotebookTestCase):
    def test_a_word_common_in_the_walk_window_never_asks_the_trigram_index(self) -> None:
        for number in range(6):
            self.save(content=f"a common word, note {number}")
        sample = mock.patch.object(search_plan, "SAMPLE_MAX", 3)
        with sample, CaptureQueriesContext(connection) as captured:
            page = search(self.alice_codex, query="common word", limit=1)
        self.assertEqual(len(page.entries), 1)
        lookups = [q["sql"] for q in captured if "notebook_entry_trigram" in q["sql"] or "enable_indexscan" in q["sql"]]
        self.assertEqual(lookups, [])  # the walk served the page (a common word: a fuller FTS/bitmap lookup)

    def test_a_query_the_indexes_narrow_exactly_reads_no_search_column(self) -> None:
        self.save(content="the rollback step", title="Launch", tags=["ops"])
        for query, reads in [("rollback", False), ("ro", True), ("ops\nx", True)]:
            with self.subTest(query=query), CaptureQueriesContext(connection) as captured:
                search(self.alice_codex, query=query)
            selected = [q["sql"].split(" FROM ")[0] for q in captured if 'FROM "notebook_entry"' in q["sql"]]
            self.assertTrue(selected)
            self.assertEqual(any("search_content" in columns for columns in selected), reads, selected)

    def test_normalized_text_holds_no_ascii_capital(self) -> None:
        # What lets SQLite's LIKE (which ignores ASCII case) narrow exactly: every code point.
        capitals = [
            hex(point)
            for point in range(0x110000)
            if not 0xD800 <= point <= 0xDFFF and any("A" <= c <= "Z" for c in normalize_for_search(chr(point)))
        ]
        self.assertEqual(capitals, [])

    def test_a_query_spanning_two_tags_is_examined_but_not_returned(self) -> None:
        self.save(content="x", tags=["red", "blue"])
        page = search(self.alice_codex, query="red\nblue")
        self.assertEqual(page.entries, [])
        self.assertLessEqual(page.scanned, 1)
        self.assertFalse(page.has_more)

    def indexed(self, phrase: str) -> set[str]:
        """Entry ids (hex) the SQLite trigram lookup finds for a phrase (the search's own:
        the FTS5 table, and alice's entries waiting for their batch)."""
        with connection.cursor() as cursor:
            cursor.execute(SQLITE_TRIGRAM_MATCH, sqlite_trigram_params(self.alice_codex.pk, phrase))
            return {row[0] for row in cursor.fetchall()}

    def test_the_index_follows_updates_and_deletes(self) -> None:
        entry = self.save(content="original wording")
        self.assertEqual(len(search(self.alice_codex, query="original").entries), 1)
        if connection.vendor == "sqlite":
            self.assertEqual(self.indexed("original"), {entry.id.hex})
        services.entry_update(
            codex=self.alice_codex,
            entry_id=entry.id,
            expected_revision=1,
            data=parse_entry_input({"content": "new wording"}),
        )
        self.assertEqual(search(self.alice_codex, query="original").scanned, 0)
        self.assertEqual(len(search(self.alice_codex, query="new wording").entries), 1)
        if connection.vendor == "sqlite":
            self.assertEqual((self.indexed("original"), self.indexed("new wording")), (set(), {entry.id.hex}))
        self.alice.delete()  # cascades through the codex to its entries
        self.assertEqual(search(self.bob_codex, query="wording").scanned, 0)
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute("SELECT count(*) FROM notebook_entry_trigram_key")
                self.assertEqual(cursor.fetchone()[0], 0)


@unittest.skipUnless(connection.vendor == "sqlite", "the batches are SQLite's (migration 0007)")
class TrigramBatchesTest(FtsCoverage, NotebookTestCase):
    """New entries reach the FTS5 table in batches; meanwhile the search finds them anyway."""

    def found(self, query: str) -> list[uuid.UUID]:
        """What a search finds by the trigram lookup alone (a sample of no entry)."""
        self.alice_codex.refresh_from_db()
        with mock.patch.object(search_plan, "SAMPLE_MAX", 0):
            return [entry.id for entry in search(self.alice_codex, query=query).entries]

    def fill_to_one_short_of_a_batch(self) -> None:
        """Saves until the next save completes a batch: its key rowid (which deleted keys
        also used up) will be ``BATCH`` past the last one covered."""
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT indexed + %s - 1 - COALESCE((SELECT seq FROM sqlite_sequence "
                "WHERE name = 'notebook_entry_trigram_key'), 0) FROM notebook_entry_trigram_state",
                [BATCH],
            )
            (missing,) = cursor.fetchone()
        covered = self.fts_coverage()[0]
        for number in range(missing):
            self.save(codex=self.bob_codex, content=f"filler {number}")
        self.assertEqual(self.fts_coverage()[0], covered)

    def test_entries_wait_for_their_batch_and_are_found_meanwhile(self) -> None:
        first = self.save(content="a zebra crossing")
        self.fill_to_one_short_of_a_batch()
        self.assertEqual(fts_holds("zebra"), set())
        self.assertEqual(self.found("zebra"), [first.id])
        last = self.save(content="another zebra")  # completes the batch
        covered, waiting = self.fts_coverage()
        self.assertEqual((len(waiting), {first.id.hex, last.id.hex} <= covered), (0, True))
        self.assertEqual(fts_holds("zebra"), {first.id.hex, last.id.hex})
        self.assertEqual(sorted(self.found("zebra")), sorted([first.id, last.id]))

    def test_a_batch_indexes_each_entry_as_it_is_then(self) -> None:
        edited = self.save(content="original wording")
        deleted = self.save(content="short-lived wording")
        services.entry_update(
            codex=self.alice_codex,
            entry_id=edited.id,
            expected_revision=1,
            data=parse_entry_input({"content": "new wording"}),
        )
        services.entry_delete(codex=self.alice_codex, entry_id=deleted.id)
        self.fill_to_one_short_of_a_batch()
        self.save(content="the batch's last entry")
        self.assertEqual(self.fts_coverage()[1], set())
        self.assertEqual(
            (fts_holds("original"), fts_holds("new wording"), fts_holds("short-lived")),
            (set(), {edited.id.hex}, set()),
        )
        # Once covered, edits and deletions reach the FTS5 table at once.
        services.entry_update(
            codex=self.alice_codex,
            entry_id=edited.id,
            expected_revision=2,
            data=parse_entry_input({"content": "final wording"}),
        )
        self.assertEqual((fts_holds("new wording"), fts_holds("final")), (set(), {edited.id.hex}))
        services.entry_delete(codex=self.alice_codex, entry_id=edited.id)
        self.assertEqual(fts_holds("final"), set())
        self.fts_coverage()

    def test_the_key_of_a_deleted_covered_entry_is_never_reused(self) -> None:
        self.fill_to_one_short_of_a_batch()
        last = self.save(content="the batch's last entry")
        self.assertIn(last.id.hex, self.fts_coverage()[0])
        services.entry_delete(codex=self.alice_codex, entry_id=last.id)
        # Had the new key taken the freed rowid, the highest covered one, the entry would
        # count as indexed without being so, and no search would find it.
        again = self.save(content="a quokka")
        self.assertEqual(self.fts_coverage()[1], {again.id.hex})
        self.assertEqual(self.found("quokka"), [again.id])

    def test_a_rolled_back_save_leaves_no_trace_in_the_index(self) -> None:
        self.fill_to_one_short_of_a_batch()
        before = self.fts_coverage()
        with self.assertRaises(RuntimeError), transaction.atomic():
            self.save(content="never committed")  # would complete the batch
            raise RuntimeError
        self.assertEqual(self.fts_coverage(), before)
        self.assertEqual(fts_holds("never committed"), set())
