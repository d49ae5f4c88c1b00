"""The fast path and the plain ORM (``CODEX_FAST_PATH=0``) give the same answers: random
notebooks and random searches, gets, saves and updates, each made both ways (on SQLite and
PostgreSQL alike, as ``make test`` runs every test on both). On PostgreSQL the fast path's
save and update are one statement each (``notebook.sql.writes``): random runs of saves,
replays, reused request ids, updates at right and wrong revisions and writes past a quota
answer and store alike both ways."""

import uuid
from typing import Any

from django.contrib.auth import get_user_model
from django.forms.models import model_to_dict
from django.test import override_settings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase

from notebook import selectors, services
from notebook.exceptions import NotebookError
from notebook.models import Codex, Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.validation import parse_entry_input, parse_search_params

# Few letters, so that random queries and tags often match (and sometimes span two tags).
WORDS = st.text(alphabet="abcß\u00e9 \n%_", min_size=0, max_size=8)
TAGS = st.lists(st.sampled_from(["red", "Red", "blue", "b lue", "ab"]), unique=True, max_size=3)
AGENTS = st.lists(st.sampled_from(["agent-1", "agent-2"]), unique=True, max_size=2)
ENTRY = st.fixed_dictionaries(
    {"content": WORDS.filter(str.strip), "tags": TAGS, "relatedAgentIds": AGENTS},
    optional={"title": WORDS.map(lambda text: text.replace("\n", " ")).filter(str.strip)},
)
SEARCH = st.fixed_dictionaries(
    {"limit": st.integers(min_value=1, max_value=25)},
    optional={
        "query": WORDS.filter(str.strip),
        "tag": st.sampled_from(["red", "ab"]),
        "related_agent_id": st.just("agent-1"),
    },
)
# A run of writes: saves under a few request ids (so some replay, some reuse an id with other
# input) and updates of the n-th entry saved (or of a missing one) expecting some revision.
WRITES = st.lists(
    st.one_of(
        st.tuples(st.just("save"), st.sampled_from(["r0", "r1", "r2"]), ENTRY),
        st.tuples(st.just("update"), st.integers(min_value=0, max_value=2), st.integers(1, 3), ENTRY),
    ),
    min_size=1,
    max_size=8,
)
PLAIN = override_settings(CODEX_FAST_PATH=False)
EXAMPLES = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def both_ways(work) -> tuple[Any, Any]:
    """``work()`` on the fast path, then on the plain ORM."""
    fast = work()
    with PLAIN:
        plain = work()
    return fast, plain


def page_of(codex, params: dict) -> list[tuple]:
    """Every page of a search, followed to its end: each entry's values and the page's coverage."""
    pages, cursor = [], None
    while True:
        page = selectors.entry_search(codex=codex, params=parse_search_params(**params, cursor=cursor))
        pages.append(([(e.id, e.revision, e.title, e.excerpt, e.tags) for e in page.entries], page.scanned))
        cursor = page.next_cursor
        if cursor is None or len(pages) > 40:
            return pages


def stored(entry_id: uuid.UUID) -> dict[str, Any]:
    """An entry's rows, less what differs by construction between two saves (ids, times, codex)."""
    entry = model_to_dict(Entry.objects.get(pk=entry_id), exclude=["id", "codex", "created_at", "updated_at"])
    revisions = [
        model_to_dict(revision, exclude=["id", "entry", "codex", "recorded_at"])
        for revision in EntryRevision.objects.filter(entry_id=entry_id).order_by("revision")
    ]
    tags = sorted(EntryTag.objects.filter(entry_id=entry_id).values_list("value", flat=True))
    agents = sorted(EntryRelatedAgent.objects.filter(entry_id=entry_id).values_list("value", flat=True))
    return {"entry": entry, "revisions": revisions, "tags": tags, "agents": agents}


class FastPathEquivalenceTest(TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        User = get_user_model()
        cls.codexes = [services.codex_for_user(user=User.objects.create(username=name)) for name in ("ann", "ben")]

    @EXAMPLES
    @given(entries=st.lists(ENTRY, min_size=0, max_size=12), searches=st.lists(SEARCH, min_size=1, max_size=4))
    def test_searches_and_gets_agree(self, entries: list[dict], searches: list[dict]) -> None:
        ann, ben = self.codexes
        saved = [
            services.entry_save(codex=ann, request_id=f"r{number}", data=parse_entry_input(entry))
            for number, entry in enumerate(entries)
        ]
        # Another codex's entries, which neither path may return.
        services.entry_save(codex=ben, request_id="other", data=parse_entry_input({"content": "abc", "tags": ["red"]}))
        for params in searches:
            fast, plain = both_ways(lambda params=params: page_of(ann, params))
            self.assertEqual(fast, plain, params)
        for entry in saved:
            fast, plain = both_ways(lambda entry=entry: selectors.entry_get(codex=ann, entry_id=entry.id))
            self.assertEqual(model_to_dict(fast), model_to_dict(plain))
            self.assertEqual((fast.created_at, fast.updated_at), (plain.created_at, plain.updated_at))

    @EXAMPLES
    @given(first=ENTRY, second=ENTRY)
    def test_saves_and_updates_store_the_same_rows(self, first: dict, second: dict) -> None:
        ann, _ = self.codexes

        def save_and_update(request_id: str) -> dict[str, Any]:
            entry = services.entry_save(codex=ann, request_id=request_id, data=parse_entry_input(first))
            services.entry_update(codex=ann, entry_id=entry.id, expected_revision=1, data=parse_entry_input(second))
            return stored(entry.id)

        fast = save_and_update("fast")
        with PLAIN:
            plain = save_and_update("plain")
        # The write numbers follow each other in the codex: the plain path's are two on.
        self.assertEqual(plain["entry"].pop("write_seq"), fast["entry"].pop("write_seq") + 2)
        self.assertEqual(fast, plain)

    @EXAMPLES
    @given(writes=WRITES)
    def test_writes_answer_and_store_alike(self, writes: list[tuple]) -> None:
        ann, ben = self.codexes

        def play(codex: Codex) -> dict[str, Any]:
            """Each write's answer (the entry returned, or the error), then what is stored."""
            saved: list[uuid.UUID] = []
            answers: list[Any] = []
            for write in writes:
                try:
                    if write[0] == "save":
                        entry = services.entry_save(codex=codex, request_id=write[1], data=parse_entry_input(write[2]))
                    else:
                        _, number, expected, data = write
                        entry_id = saved[number] if number < len(saved) else uuid.uuid4()
                        entry = services.entry_update(
                            codex=codex, entry_id=entry_id, expected_revision=expected, data=parse_entry_input(data)
                        )
                except NotebookError as error:
                    answers.append((error.code, error.message))
                    continue
                if entry.id not in saved:
                    saved.append(entry.id)
                returned = model_to_dict(entry, exclude=["id", "codex", "created_at", "updated_at"])
                answers.append((saved.index(entry.id), returned, entry.updated_at >= entry.created_at))
            usage = Codex.objects.filter(pk=codex.pk).values("entry_count", "stored_bytes", "last_write_seq").get()
            return {"answers": answers, "stored": [stored(entry_id) for entry_id in saved], "usage": usage}

        # Quotas small enough that some runs pass them.
        with override_settings(CODEX_QUOTA_ENTRIES=2, CODEX_QUOTA_STORED_BYTES=24):
            fast = play(ann)
            with PLAIN:
                plain = play(ben)
        self.assertEqual(fast, plain)
