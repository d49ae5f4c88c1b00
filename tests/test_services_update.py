import datetime as dt
import uuid
from unittest import mock

from notebook import services
from notebook.exceptions import Conflict, NotFound
from notebook.models import Entry, EntryRevision, EntryTag
from notebook.representations import entry_dict
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase


class EntryUpdateTest(NotebookTestCase):
    def update(self, entry, expected: int, codex=None, **data):
        return services.entry_update(
            codex=codex or self.alice_codex,
            entry_id=entry.id if hasattr(entry, "id") else entry,
            expected_revision=expected,
            data=parse_entry_input(data),
        )

    def test_it_replaces_the_entry_and_removes_omitted_fields(self) -> None:
        entry = self.save(content="v1", title="T", tags=["a"], relatedAgentIds=["x"], provenance={"p": 1})
        updated = self.update(entry, 1, content="v2")
        data = entry_dict(updated)
        self.assertEqual(data["revision"], 2)
        self.assertEqual(data["content"], "v2")
        self.assertNotIn("title", data)
        self.assertNotIn("provenance", data)
        self.assertEqual((data["tags"], data["relatedAgentIds"]), ([], []))
        self.assertEqual(updated.created_at, entry.created_at)
        self.assertGreaterEqual(updated.updated_at, entry.updated_at)
        self.assertFalse(EntryTag.objects.filter(entry=entry).exists())

    def test_each_update_records_a_full_snapshot_even_when_identical(self) -> None:
        entry = self.save(content="same", tags=["t"])
        self.update(entry, 1, content="same", tags=["t"])
        self.update(entry, 2, content="same", tags=["t"])
        snapshots = EntryRevision.objects.filter(entry=entry).order_by("revision")
        self.assertEqual([s.revision for s in snapshots], [1, 2, 3])
        self.assertTrue(all(s.content == "same" and s.tags == ["t"] for s in snapshots))

    def test_it_returns_conflict_on_a_wrong_revision(self) -> None:
        entry = self.save(content="v1")
        self.update(entry, 1, content="v2")
        with self.assertRaises(Conflict) as caught:
            self.update(entry, 1, content="v3")
        self.assertIn("revision 2", caught.exception.message)
        self.assertEqual(EntryRevision.objects.filter(entry=entry).count(), 2)

    def test_another_codexs_id_is_not_found_like_a_random_id(self) -> None:
        entry = self.save(content="alice's")
        with self.assertRaises(NotFound) as foreign:
            self.update(entry, 1, codex=self.bob_codex, content="bob was here")
        with self.assertRaises(NotFound) as random:
            self.update(uuid.uuid4(), 1, codex=self.bob_codex, content="bob was here")
        self.assertEqual(foreign.exception.message, random.exception.message)
        entry.refresh_from_db()
        self.assertEqual((entry.content, entry.revision), ("alice's", 1))

    def test_updated_at_is_now_to_the_millisecond_and_never_before_created_at(self) -> None:
        entry = self.save(content="v1")
        later = entry.created_at + dt.timedelta(seconds=5, milliseconds=7)
        with mock.patch.object(services, "_now", return_value=later):
            updated = self.update(entry, 1, content="v2")
        self.assertEqual((updated.created_at, updated.updated_at), (entry.created_at, later))
        # A clock set back (another host's, or adjusted) never puts updatedAt before createdAt.
        with mock.patch.object(services, "_now", return_value=entry.created_at - dt.timedelta(days=1)):
            again = self.update(entry, 2, content="v3")
        self.assertEqual(again.updated_at, entry.created_at)
        stored = Entry.objects.get(pk=entry.id)
        self.assertEqual((stored.updated_at, stored.revision), (entry.created_at, 3))
        self.assertEqual(EntryRevision.objects.get(entry=entry, revision=3).recorded_at, entry.created_at)
