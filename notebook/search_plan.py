"""Which way a query's candidates are sought: walking the codex in id order, or asking the
trigram index (``notebook.selectors._fetch_candidates``).

The two cost what the query's density in the codex makes them cost, in opposite ways:

- the walk tests entries one by one in id order until the page is full, so it costs about
  ``needed / density`` entries: nothing for a word in every entry, the whole codex for a
  word in none;
- the trigram index gives every match of the word in the codex (PostgreSQL's bitmap of the
  codex trigram keys' GIN index; SQLite's FTS5 table, whose matches in other codexes count too),
  which are then looked up and put in id order: about ``density * entries`` matches.

Neither the index nor the planner knows a word's density in one codex (PostgreSQL's
statistics are over the whole table, FTS5 keeps none), so the walk's first stretch is a
sample: the next ``sample_size`` entries in id order, walked as any walk is (what it finds
is the page's first candidates, never thrown away). How many of them hold the word gives
the density, and ``walk_window`` picks the cheaper way for the rest of the page. Entry ids
are random (``uuid4``), so the matches are spread evenly in id order and a stretch of them is
a fair sample. The plan only divides the page's work: both ways give the same candidates
in the same order, so a wrong guess costs time, never a match.
"""

import math

# The longest sample (and so the most a word that the sample finds nowhere costs walking):
# a codex of a million entries samples this many.
SAMPLE_MAX = 1_000
# A match that the trigram index gives costs about three entries that the walk tests: the
# index's own work for it (FTS5's phrase check; PostgreSQL's recheck of the bitmap's row), its
# lookup by id and its share of the sort, against reading one entry and testing three columns.
INDEX_MATCH_COST = 3.0
# A walk chosen from the sample covers this many times the entries that should fill the
# page, so that a density the sample overstated a little still fills it; what a shorter
# stretch leaves out comes from the index.
WALK_MARGIN = 2.0


def sample_size(entries: int, needed: int) -> int:
    """How many entries the sample walks, for a codex of ``entries`` and a page that needs
    ``needed`` candidates.

    About the square root of the codex: walking that many entries costs about what the index
    costs for a word held once in every that many, the densest a word that the sample found
    nowhere may still be. At least four pages' worth, so that a word in a quarter of the
    entries or more fills the page from the sample alone; at most ``SAMPLE_MAX``.
    """
    return min(SAMPLE_MAX, max(4 * needed, math.isqrt(max(entries, 0))))


def walk_window(*, found: int, needed: int, sample: int, entries: int) -> int | None:
    """After a sample of ``sample`` entries found ``found`` candidates and the page still
    needs ``needed`` more: how many more entries to walk, or None to ask the trigram index.

    Walking is expected to cost ``needed * sample / found`` entries, the index
    ``INDEX_MATCH_COST * found * entries / sample`` matches; the cheaper wins. A sample that
    found nothing asks the index.
    """
    if found <= 0:
        return None
    walk = needed * sample / found
    index = INDEX_MATCH_COST * found * entries / sample
    if walk > index:
        return None
    return math.ceil(WALK_MARGIN * walk)
