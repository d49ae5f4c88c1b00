"""Deleting one entry or a whole codex removes every row that belongs to it, and nothing else."""

from notebook import services
from notebook.exceptions import NotFound
from notebook.models import Entry, EntryRelatedAgent, EntryRevision, EntryTag, RequestKey
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase


def rows_of(entry_id) -> dict[str, int]:
    return {
        "entry": Entry.objects.filter(pk=entry_id).count(),
        "revisions": EntryRevision.objects.filter(entry_id=entry_id).count(),
        "tags": EntryTag.objects.filter(entry_id=entry_id).count(),
        "agents": EntryRelatedAgent.objects.filter(entry_id=entry_id).count(),
        "request keys": RequestKey.objects.filter(entry_id=entry_id).count(),
    }


class EntryDeleteTest(NotebookTestCase):
    def test_it_removes_the_entry_with_its_revisions_index_rows_and_request_keys(self) -> None:
        entry = self.save(content="v1", tags=["a", "b"], relatedAgentIds=["agent-1"])
        services.entry_update(
            codex=self.alice_codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": "v2"})
        )
        kept = self.save(content="other", tags=["a"])
        services.entry_delete(codex=self.alice_codex, entry_id=entry.id)
        self.assertEqual(set(rows_of(entry.id).values()), {0})
        self.assertEqual(rows_of(kept.id), {"entry": 1, "revisions": 1, "tags": 1, "agents": 0, "request keys": 1})

    def test_it_is_not_found_for_an_entry_of_another_codex_and_leaves_it_alone(self) -> None:
        bobs = self.save(self.bob_codex, content="bob's")
        with self.assertRaises(NotFound):
            services.entry_delete(codex=self.alice_codex, entry_id=bobs.id)
        self.assertEqual(rows_of(bobs.id)["entry"], 1)

    def test_a_replayed_save_after_deletion_creates_a_new_entry(self) -> None:
        first = self.save(request_id="same", content="x")
        services.entry_delete(codex=self.alice_codex, entry_id=first.id)
        again = self.save(request_id="same", content="x")
        self.assertNotEqual(again.id, first.id)
        self.assertEqual(again.revision, 1)


class CodexClearTest(NotebookTestCase):
    def test_it_deletes_every_entry_of_this_codex_only(self) -> None:
        mine = [self.save(content=f"n{i}", tags=["t"]) for i in range(5)]
        bobs = self.save(self.bob_codex, content="bob's", tags=["t"])
        self.assertEqual(services.codex_clear(codex=self.alice_codex), 5)
        for entry in mine:
            self.assertEqual(set(rows_of(entry.id).values()), {0})
        self.assertEqual(rows_of(bobs.id)["entry"], 1)
        self.assertEqual(EntryTag.objects.filter(codex=self.bob_codex).count(), 1)
        self.assertEqual(services.codex_clear(codex=self.alice_codex), 0)
