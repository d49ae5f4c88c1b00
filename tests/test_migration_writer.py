"""Migration 0005_revision_writer marks every revision written before it as "unknown"."""

import datetime as dt

from django.test import TransactionTestCase

from tests.migrations import before, latest, migrate

WRITER_MIGRATION = ("notebook", "0005_revision_writer")


class RevisionWriterMigrationTest(TransactionTestCase):
    def test_older_revisions_are_backfilled_as_written_by_an_unknown_application(self) -> None:
        self.addCleanup(migrate, latest())
        apps = migrate(before(WRITER_MIGRATION))
        User = apps.get_model("auth", "User")
        Codex = apps.get_model("notebook", "Codex")
        Entry = apps.get_model("notebook", "Entry")
        EntryRevision = apps.get_model("notebook", "EntryRevision")
        now = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
        codex = Codex.objects.create(owner=User.objects.create(username="old-timer"))
        entry = Entry.objects.create(
            codex=codex, revision=1, content="old", content_bytes=3, created_at=now, updated_at=now
        )
        EntryRevision.objects.create(codex=codex, entry=entry, revision=1, content="old", recorded_at=now)

        apps = migrate([WRITER_MIGRATION])
        revision = apps.get_model("notebook", "EntryRevision").objects.get()
        self.assertEqual(
            (
                revision.writer_kind,
                revision.writer_application_id,
                revision.writer_client_id,
                revision.writer_name,
                revision.writer_scopes,
            ),
            ("unknown", None, "", "", ""),
        )
