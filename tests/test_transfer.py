"""Export and import: a round trip reproduces every entry and revision exactly; importing twice
changes nothing; one bad entry refuses the whole file; ids never collide across codexes."""

import copy
import io
import json
import re
import tempfile
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from notebook import selectors, services, transfer
from notebook.models import Entry, EntryRelatedAgent, EntryRevision, EntryTag
from notebook.representations import entry_dict
from notebook.validation import parse_entry_input, parse_search_params
from tests.base import NotebookTestCase


def export_of(codex) -> dict:
    return json.loads("".join(transfer.export_json_chunks(codex=codex)))


def without_writers(entries: list[dict]) -> list[dict]:
    """Export entries with each snapshot's ``writer`` left out."""
    return [
        {**entry, "revisions": [{k: v for k, v in r.items() if k != "writer"} for r in entry["revisions"]]}
        for entry in entries
    ]


def snapshot_rows(codex) -> list[tuple]:
    """Everything stored for a codex's entries, as comparable tuples (ids excluded)."""
    rows = []
    for entry in Entry.objects.filter(codex=codex).order_by("created_at", "content"):
        data = entry_dict(entry)
        data.pop("id")
        revisions = [
            (r.revision, r.title, r.content, r.tags, r.related_agent_ids, r.provenance, r.recorded_at)
            for r in EntryRevision.objects.filter(entry=entry).order_by("revision")
        ]
        index = (
            sorted(EntryTag.objects.filter(entry=entry).values_list("value", flat=True)),
            sorted(EntryRelatedAgent.objects.filter(entry=entry).values_list("value", flat=True)),
            (entry.search_title, entry.search_content, entry.search_tags),
        )
        rows.append((json.dumps(data, sort_keys=True), revisions, index))
    return rows


class TransferTestCase(NotebookTestCase):
    def setUp(self) -> None:
        self.carol = get_user_model().objects.create_user("carol")
        self.carol_codex = services.codex_for_user(user=self.carol)
        first = self.save(
            title="Launch", content="<b>Line one</b>\r\nline two ﬁ", tags=["launch", "Q3"], relatedAgentIds=["a-1"]
        )
        services.entry_update(
            codex=self.alice_codex,
            entry_id=first.id,
            expected_revision=1,
            data=parse_entry_input({"content": "rewritten", "provenance": {"source": {"tool": "x"}, "n": 1.5}}),
        )
        self.save(content="second note", tags=["misc"])
        self.save(content="é" * 20)


class ExportTest(TransferTestCase):
    def test_it_is_one_versioned_document_with_every_entry_and_revision(self) -> None:
        document = export_of(self.alice_codex)
        self.assertEqual(document["format"], "agent-codex-export")
        self.assertEqual(document["version"], 2)
        self.assertEqual(document["owner"], "alice")
        self.assertEqual(len(document["entries"]), 3)
        ids = [entry["id"] for entry in document["entries"]]
        self.assertEqual(ids, sorted(ids))
        updated = next(entry for entry in document["entries"] if entry["revision"] == 2)
        self.assertEqual([r["revision"] for r in updated["revisions"]], [1, 2])
        self.assertEqual(updated["revisions"][0]["title"], "Launch")
        self.assertNotIn("title", updated)
        self.assertEqual(updated["provenance"], {"source": {"tool": "x"}, "n": 1.5})

    def test_it_reads_the_codex_in_batches(self) -> None:
        entries = list(transfer.export_entries(codex=self.alice_codex, batch_size=1))
        self.assertEqual(len(entries), 3)
        # One query for each batch of entries and one for its revisions, plus the empty last batch.
        with self.assertNumQueries(2 * 3 + 1):
            list(transfer.export_entries(codex=self.alice_codex, batch_size=1))

    def test_markdown_keeps_content_verbatim_inside_a_longer_fence(self) -> None:
        self.save(content="```python\nprint(1)\n```")
        text = "".join(transfer.export_markdown_chunks(codex=self.alice_codex))
        self.assertIn("````text\n```python\nprint(1)\n```\n````", text)
        self.assertIn("## Untitled note", text)

    def test_the_markdown_file_lists_the_notes_newest_first_as_the_list_page_does(self) -> None:
        text = "".join(transfer.export_markdown_chunks(codex=self.alice_codex, batch_size=2))
        self.assertTrue(text.startswith("# alice's notebook\n"), text[:40])
        listed = selectors.entry_recent(codex=self.alice_codex, params=parse_search_params(limit=20)).entries
        self.assertEqual(re.findall(r"- id: `([^`]+)`", text), [str(entry.id) for entry in listed])
        self.assertNotIn("Written while", text)

    def test_a_note_written_while_the_markdown_file_is_made_is_never_left_out(self) -> None:
        launch, second, newest = [
            entry.id for entry in Entry.objects.filter(codex=self.alice_codex).order_by("updated_at", "write_seq")
        ]
        chunks = transfer.export_markdown_chunks(codex=self.alice_codex, batch_size=1)
        self.assertIn("notebook", next(chunks))
        self.assertIn(str(newest), next(chunks))  # listed; the other two are not reached yet
        for entry_id, revision in [(launch, 2), (newest, 1)]:  # one ahead of the walk, one behind it
            services.entry_update(
                codex=self.alice_codex,
                entry_id=entry_id,
                expected_revision=revision,
                data=parse_entry_input({"content": f"changed during the export {entry_id}"}),
            )
        added = self.save(content="saved during the export")
        rest = "".join(chunks)
        before, during = rest.split("Written while this file was being made")
        self.assertEqual(re.findall(r"- id: `([^`]+)`", before), [str(second)])
        self.assertEqual(re.findall(r"- id: `([^`]+)`", during), [str(launch), str(newest), str(added.id)])
        self.assertIn(f"changed during the export {launch}", during)

    def test_it_is_empty_for_an_empty_codex(self) -> None:
        self.assertEqual(export_of(self.carol_codex)["entries"], [])


class ImportTest(TransferTestCase):
    def import_into(self, codex, document) -> transfer.ImportReport:
        return transfer.codex_import(codex=codex, document=transfer.load_document(json.dumps(document)))

    def test_a_round_trip_into_a_fresh_codex_reproduces_every_entry_and_revision(self) -> None:
        document = export_of(self.alice_codex)
        services.codex_clear(codex=self.alice_codex)  # as if importing on another server: ids are free
        report = self.import_into(self.carol_codex, document)
        self.assertTrue(report.applied)
        self.assertEqual((report.created, report.already_present, report.renumbered), (3, 0, 0))
        again = export_of(self.carol_codex)
        # ids, revisions, times: exact; the writers now say "import" (tests/test_writers_transfer.py).
        self.assertEqual(without_writers(again["entries"]), without_writers(document["entries"]))

    def test_a_round_trip_keeps_the_entries_searchable_like_saved_ones(self) -> None:
        before = snapshot_rows(self.alice_codex)
        document = export_of(self.alice_codex)
        services.codex_clear(codex=self.alice_codex)
        self.import_into(self.alice_codex, document)
        self.assertEqual(snapshot_rows(self.alice_codex), before)

    def test_importing_the_same_file_twice_creates_nothing_new(self) -> None:
        document = export_of(self.alice_codex)
        self.assertEqual(self.import_into(self.alice_codex, document).already_present, 3)
        services.codex_clear(codex=self.alice_codex)
        self.import_into(self.alice_codex, document)
        rows = snapshot_rows(self.alice_codex)
        report = self.import_into(self.alice_codex, document)
        self.assertEqual((report.created, report.already_present), (0, 3))
        self.assertEqual(snapshot_rows(self.alice_codex), rows)

    def test_ids_of_another_codex_get_new_ids_and_leave_that_codex_alone(self) -> None:
        document = export_of(self.alice_codex)
        alice_before = snapshot_rows(self.alice_codex)
        report = self.import_into(self.carol_codex, document)
        self.assertEqual((report.created, report.renumbered), (3, 3))
        self.assertEqual(snapshot_rows(self.carol_codex), alice_before)
        self.assertEqual(snapshot_rows(self.alice_codex), alice_before)
        carol_ids = set(Entry.objects.filter(codex=self.carol_codex).values_list("id", flat=True))
        self.assertFalse(carol_ids & {entry.id for entry in Entry.objects.filter(codex=self.alice_codex)})
        # Idempotent even then: the new ids are derived from the codex and the original id.
        with CaptureQueriesContext(connection) as queries:
            report = self.import_into(self.carol_codex, document)
        self.assertEqual((report.created, report.already_present), (0, 3))
        # Every read of the entry table names the codex (the tables can be distributed by codex).
        entry_reads = [query["sql"] for query in queries if 'FROM "notebook_entry"' in query["sql"]]
        self.assertTrue(entry_reads)
        for sql in entry_reads:
            self.assertIn('"notebook_entry"."codex_id" =', sql)

    def test_a_file_with_one_bad_entry_changes_nothing_and_says_which_and_why(self) -> None:
        document = export_of(self.alice_codex)
        bad = copy.deepcopy(document)
        bad["entries"][1]["tags"] = ["dup", "dup"]
        bad["entries"][1]["revisions"][-1]["tags"] = ["dup", "dup"]
        services.codex_clear(codex=self.alice_codex)
        report = self.import_into(self.carol_codex, bad)
        self.assertFalse(report.applied)
        self.assertEqual(report.refused_count, 1)
        self.assertEqual(report.refused[0].index, 1)
        self.assertEqual(report.refused[0].entry_id, document["entries"][1]["id"])
        self.assertIn("repeats 'dup'", report.refused[0].reason)
        self.assertEqual(Entry.objects.filter(codex=self.carol_codex).count(), 0)

    def test_it_refuses_entries_that_break_the_rules(self) -> None:
        good = export_of(self.alice_codex)["entries"][0]
        cases = {
            "bad id": {"id": "NOT-A-UUID"},
            "uppercase id": {"id": good["id"].upper()},
            "no content": {"content": None},
            "content too long": {"content": "x" * 65_537},
            "control char in title": {"title": "a\x07"},
            "unknown member": {"colour": "red"},
            "revision zero": {"revision": 0},
            "bad time": {"createdAt": "yesterday"},
            "naive time": {"updatedAt": "2026-11-30T12:00:00"},
            "updated before created": {"createdAt": "2099-01-01T00:00:00.000Z"},
            "no revisions": {"revisions": []},
            "current revision missing": {"revision": good["revision"] + 1},
            "provenance too deep": {"provenance": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}},
        }
        for name, change in cases.items():
            with self.subTest(name):
                entry = {**copy.deepcopy(good), **change}
                entry = {key: value for key, value in entry.items() if value is not None}
                report = self.import_into(
                    self.carol_codex, {"format": "agent-codex-export", "version": 2, "entries": [entry]}
                )
                self.assertFalse(report.applied)
                self.assertTrue(report.refused[0].reason)
        self.assertEqual(Entry.objects.filter(codex=self.carol_codex).count(), 0)

    def test_it_refuses_a_file_that_is_not_an_export(self) -> None:
        for raw in [
            b"\xff",
            b"[]",
            b'{"format": "other"}',
            b'{"format": "agent-codex-export", "version": 3, "entries": []}',
            b'{"format": "agent-codex-export", "version": true, "entries": []}',
            b'{"format": "agent-codex-export", "version": 2}',
            b'{"format": "agent-codex-export", "version": 1}',
        ]:
            with self.subTest(raw=raw), self.assertRaises(transfer.ImportRefused):
                transfer.load_document(raw)

    def test_the_same_id_twice_in_one_file_is_refused(self) -> None:
        document = export_of(self.alice_codex)
        document["entries"].append(copy.deepcopy(document["entries"][0]))
        report = self.import_into(self.carol_codex, document)
        self.assertEqual([r.index for r in report.refused], [3])


class TransferCommandsTest(TransferTestCase):
    def test_export_then_import_by_command_round_trips_and_reports(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "alice.json"
            err = io.StringIO()
            call_command("codex_export", "alice", "-o", str(path), stderr=err)
            self.assertIn("exported 3 entries", err.getvalue())
            self.assertNotIn("\r", err.getvalue())  # no progress bar when not on a terminal
            out = io.StringIO()
            call_command("codex_import", "carol", str(path), stdout=out, stderr=io.StringIO())
            self.assertIn("imported 3 of 3 entries", out.getvalue())
            self.assertEqual(snapshot_rows(self.carol_codex), snapshot_rows(self.alice_codex))

    def test_export_writes_to_standard_output_without_a_file(self) -> None:
        out = io.StringIO()
        call_command("codex_export", "alice", stdout=out, stderr=io.StringIO())
        self.assertEqual(len(json.loads(out.getvalue())["entries"]), 3)

    def test_import_of_a_bad_file_fails_and_lists_the_refusals(self) -> None:
        document = export_of(self.alice_codex)
        document["entries"][2]["content"] = ""
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bad.json"
            path.write_text(json.dumps(document))
            err = io.StringIO()
            with self.assertRaisesMessage(CommandError, "nothing imported: 1 of 3 entries"):
                call_command("codex_import", "carol", str(path), stdout=io.StringIO(), stderr=err)
        self.assertIn("entry #2", err.getvalue())
        self.assertEqual(Entry.objects.filter(codex=self.carol_codex).count(), 0)

    def test_commands_refuse_unknown_users(self) -> None:
        with self.assertRaises(CommandError):
            call_command("codex_export", "nobody", stdout=io.StringIO())
        with self.assertRaises(CommandError):
            call_command("codex_import", "nobody", "/nonexistent", stdout=io.StringIO())
