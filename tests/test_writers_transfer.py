"""Writers in the export (version 2) and on import: an import is recorded as such, carrying the
file's writer as information, and never counts as an application of this server."""

import copy
import json

from django.contrib.auth import get_user_model

from notebook import selectors, services, transfer
from notebook.models import EntryRevision
from notebook.validation import parse_entry_input
from notebook.writers import Writer
from tests.base import NotebookTestCase

DESKTOP = Writer.application(
    application_id=None, client_id="desktop-client", name="Desktop assistant", scopes=frozenset({"notes:read"})
)


def export_of(codex) -> dict:
    return json.loads("".join(transfer.export_json_chunks(codex=codex)))


def import_into(codex, document: dict) -> transfer.ImportReport:
    return transfer.codex_import(codex=codex, document=transfer.load_document(json.dumps(document)))


class WritersTransferTest(NotebookTestCase):
    def setUp(self) -> None:
        self.carol_codex = services.codex_for_user(user=get_user_model().objects.create_user("carol"))
        # The application row is not needed to record a writer's frozen fields.
        note = services.entry_save(
            codex=self.alice_codex, request_id="r", data=parse_entry_input({"content": "one"}), writer=DESKTOP
        )
        services.entry_update(
            codex=self.alice_codex, entry_id=note.id, expected_revision=1, data=parse_entry_input({"content": "two"})
        )

    def test_the_export_names_the_writer_of_every_revision(self) -> None:
        revisions = export_of(self.alice_codex)["entries"][0]["revisions"]
        self.assertEqual(
            [r["writer"] for r in revisions],
            [
                {
                    "kind": "application",
                    "clientId": "desktop-client",
                    "name": "Desktop assistant",
                    "scopes": "notes:read",
                },
                {"kind": "unknown", "clientId": "", "name": "", "scopes": ""},
            ],
        )

    def test_an_import_is_recorded_as_an_import_carrying_the_files_writer(self) -> None:
        import_into(self.carol_codex, export_of(self.alice_codex))
        rows = list(
            EntryRevision.objects.filter(entry__codex=self.carol_codex)
            .order_by("revision")
            .values_list("writer_kind", "writer_application", "writer_client_id", "writer_name", "writer_scopes")
        )
        self.assertEqual(
            rows,
            [("import", None, "desktop-client", "Desktop assistant", "notes:read"), ("import", None, "", "", "")],
        )
        self.assertEqual(EntryRevision.objects.get(entry__codex=self.carol_codex, revision=2).writer.label, "an import")
        self.assertEqual(
            EntryRevision.objects.get(entry__codex=self.carol_codex, revision=1).writer.label,
            "an import (originally Desktop assistant)",
        )
        # Not counted as the application's writing, and not listed under it.
        self.assertEqual(selectors.writer_counts(codex=self.carol_codex, client_ids=["desktop-client"]), {})
        self.assertEqual(
            selectors.writer_counts(codex=self.alice_codex, client_ids=["desktop-client"]).keys(), {"desktop-client"}
        )

    def test_a_re_export_of_an_import_keeps_the_original_writer(self) -> None:
        import_into(self.carol_codex, export_of(self.alice_codex))
        writers = [r["writer"] for r in export_of(self.carol_codex)["entries"][0]["revisions"]]
        self.assertEqual(
            writers[0],
            {"kind": "import", "clientId": "desktop-client", "name": "Desktop assistant", "scopes": "notes:read"},
        )

    def test_a_version_1_file_still_imports_and_refuses_a_writer(self) -> None:
        document = export_of(self.alice_codex)
        document["version"] = 1
        with_writer = copy.deepcopy(document)
        self.assertFalse(import_into(self.carol_codex, with_writer).applied)
        for entry in document["entries"]:
            for revision in entry["revisions"]:
                del revision["writer"]
        services.codex_clear(codex=self.alice_codex)
        self.assertTrue(import_into(self.carol_codex, document).applied)
        self.assertEqual(set(EntryRevision.objects.values_list("writer_kind", "writer_client_id")), {("import", "")})

    def test_a_bad_writer_refuses_the_entry(self) -> None:
        good = export_of(self.alice_codex)
        cases = {
            "not an object": "desktop",
            "unknown member": {"kind": "import", "colour": "red"},
            "unknown kind": {"kind": "robot"},
            "control character": {"kind": "application", "name": "a\x07"},
            "too long": {"kind": "application", "clientId": "x" * 256},
            "not a string": {"kind": "application", "scopes": ["notes:read"]},
        }
        for name, writer in cases.items():
            with self.subTest(name):
                document = copy.deepcopy(good)
                document["entries"][0]["revisions"][0]["writer"] = writer
                report = import_into(self.carol_codex, document)
                self.assertFalse(report.applied)
                self.assertIn("writer", report.refused[0].reason)
