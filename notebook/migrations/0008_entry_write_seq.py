"""Newest first with a true order: each save and update gets its codex's next write number.

Saves are kept to the millisecond, so two writes in one millisecond tied on ``updated_at``
and "newest first" then ordered them by their random ids. ``Codex.last_write_seq`` counts a
codex's writes (raised by the quota charge, in the UPDATE that takes the codex row's lock)
and ``Entry.write_seq`` keeps the number of an entry's last write; the recent index and the
person's pages order by (``updated_at``, ``write_seq``).

Existing entries are numbered within their codex in the order they had, (``updated_at``,
``id``), and each codex's counter starts after its highest number.

SQLite rebuilds ``notebook_entry`` to add a column with a default, which drops the table's
triggers (migration 0007): they are dropped before and made again after.
"""

import importlib

from django.db import migrations, models

batches = importlib.import_module("notebook.migrations.0007_trigram_batches")

NUMBER_ENTRIES = (
    "UPDATE notebook_entry SET write_seq = numbered.n FROM ("
    "SELECT id, ROW_NUMBER() OVER (PARTITION BY codex_id ORDER BY updated_at, id) AS n FROM notebook_entry"
    ") AS numbered WHERE notebook_entry.id = numbered.id"
)
START_COUNTERS = (
    "UPDATE notebook_codex SET last_write_seq = "
    "(SELECT COALESCE(MAX(e.write_seq), 0) FROM notebook_entry e WHERE e.codex_id = notebook_codex.id)"
)


class Migration(migrations.Migration):
    dependencies = [
        ("notebook", "0007_trigram_batches"),
    ]

    operations = [
        migrations.RunPython(batches.drop_triggers, batches.create_triggers),
        migrations.AddField(
            model_name="codex",
            name="last_write_seq",
            field=models.PositiveBigIntegerField(default=0, help_text="Saves and updates made in this codex"),
        ),
        migrations.AddField(
            model_name="entry",
            name="write_seq",
            field=models.PositiveBigIntegerField(default=0),
        ),
        migrations.RunPython(batches.create_triggers, batches.drop_triggers),
        migrations.RunSQL([NUMBER_ENTRIES, START_COUNTERS], migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="entry", name="notebook_entry_codex_recent"),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(fields=["codex", "-updated_at", "-write_seq"], name="notebook_entry_codex_recent"),
        ),
    ]
