import uuid

from django.contrib.auth import get_user_model

from notebook import selectors, services
from notebook.exceptions import Conflict, NotFound
from notebook.models import Codex, Entry, EntryRevision, RequestKey
from notebook.representations import entry_dict
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase


class EntrySaveTest(NotebookTestCase):
    def test_it_creates_revision_one_with_a_snapshot_and_a_request_key(self) -> None:
        entry = self.save(request_id="r1", content="c", title="T", tags=["b", "a"], provenance={"s": 1})
        self.assertEqual(entry.revision, 1)
        self.assertEqual(entry.created_at, entry.updated_at)
        snapshot = EntryRevision.objects.get(entry=entry)
        self.assertEqual((snapshot.revision, snapshot.content, snapshot.tags), (1, "c", ["b", "a"]))
        key = RequestKey.objects.get(codex=self.alice_codex, request_id="r1")
        self.assertEqual(key.entry_id, entry.id)

    def test_entry_output_has_the_contract_shape(self) -> None:
        entry = self.save(content="c", tags=["x"])
        data = entry_dict(entry)
        self.assertEqual(list(data), ["id", "revision", "content", "tags", "relatedAgentIds", "createdAt", "updatedAt"])
        self.assertRegex(data["id"], r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
        self.assertRegex(data["createdAt"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
        self.assertEqual(data["relatedAgentIds"], [])

    def test_replay_with_the_same_input_returns_the_current_revision(self) -> None:
        first = self.save(request_id="r1", content="v1", tags=["a"])
        services.entry_update(
            codex=self.alice_codex,
            entry_id=first.id,
            expected_revision=1,
            data=parse_entry_input({"content": "v2"}),
        )
        replay = self.save(request_id="r1", content="v1", tags=["a"])
        self.assertEqual(replay.id, first.id)
        self.assertEqual(replay.revision, 2)
        self.assertEqual(replay.content, "v2")
        self.assertEqual(Entry.objects.filter(codex=self.alice_codex).count(), 1)

    def test_replay_with_reordered_keys_is_the_same_input(self) -> None:
        first = services.entry_save(
            codex=self.alice_codex, request_id="r", data=parse_entry_input({"content": "c", "title": "t"})
        )
        again = services.entry_save(
            codex=self.alice_codex, request_id="r", data=parse_entry_input({"title": "t", "content": "c"})
        )
        self.assertEqual(first.id, again.id)

    def test_it_returns_conflict_when_request_id_reused_with_other_input(self) -> None:
        self.save(request_id="r1", content="v1", tags=["a", "b"])
        for other in [{"content": "v2", "tags": ["a", "b"]}, {"content": "v1", "tags": ["b", "a"]}]:
            with self.assertRaises(Conflict) as caught:
                self.save(request_id="r1", **other)
            self.assertEqual(caught.exception.code, "conflict")
        self.assertEqual(Entry.objects.filter(codex=self.alice_codex).count(), 1)

    def test_request_ids_are_scoped_to_the_codex(self) -> None:
        alices = self.save(request_id="shared", content="alice")
        bobs = self.save(codex=self.bob_codex, request_id="shared", content="bob")
        self.assertNotEqual(alices.id, bobs.id)
        self.assertEqual(bobs.codex, self.bob_codex)

    def test_codex_is_created_on_first_use_and_found_afterwards(self) -> None:
        carol = get_user_model().objects.create_user("carol")
        created = services.codex_for_user(user=carol)
        # Fresh user objects, so no cached codex can answer without the database.
        for user in [get_user_model().objects.get(pk=carol.pk), get_user_model().objects.get(pk=self.alice.pk)]:
            with self.assertNumQueries(1):
                found = services.codex_for_user(user=user)
            self.assertEqual(found.owner_id, user.pk)
        self.assertEqual(services.codex_for_user(user=get_user_model().objects.get(pk=carol.pk)), created)
        self.assertEqual(Codex.objects.filter(owner__in=[carol, self.alice]).count(), 2)

    def test_get_finds_own_entry_and_hides_others(self) -> None:
        entry = self.save(content="secret")
        self.assertEqual(selectors.entry_get(codex=self.alice_codex, entry_id=entry.id).content, "secret")
        with self.assertRaises(NotFound) as foreign:
            selectors.entry_get(codex=self.bob_codex, entry_id=entry.id)
        with self.assertRaises(NotFound) as missing:
            selectors.entry_get(codex=self.bob_codex, entry_id=uuid.uuid4())
        self.assertEqual(foreign.exception.message, missing.exception.message)
