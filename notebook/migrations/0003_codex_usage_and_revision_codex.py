"""Codex usage columns (for quotas) and codex_id on EntryRevision (so every notebook
table can be distributed by codex), both backfilled from existing rows.

Follows 0002 (the trigram search index).
"""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def _revision_bytes(revision) -> int:
    # Mirrors notebook.quotas.input_bytes (a migration must not import live code).
    import json

    total = len(revision.content.encode("utf-8"))
    total += len(revision.title.encode("utf-8")) if revision.title is not None else 0
    total += sum(len(value.encode("utf-8")) for value in (*revision.tags, *revision.related_agent_ids))
    if revision.provenance is not None:
        compact = json.dumps(
            revision.provenance, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
        total += len(compact.encode("utf-8"))
    return total


def backfill(apps, schema_editor) -> None:
    Codex = apps.get_model("notebook", "Codex")
    Entry = apps.get_model("notebook", "Entry")
    EntryRevision = apps.get_model("notebook", "EntryRevision")
    if schema_editor.connection.vendor == "postgresql":
        # Check the new foreign key now, so that no trigger event is still pending when
        # the column becomes NOT NULL below (PostgreSQL refuses that ALTER otherwise).
        schema_editor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    # One UPDATE for codex_id; then one pass over the revisions for stored bytes.
    EntryRevision.objects.update(
        codex_id=Subquery(Entry.objects.filter(pk=OuterRef("entry_id")).values("codex_id")[:1])
    )
    for codex in Codex.objects.all().iterator(chunk_size=1000):
        stored = sum(
            _revision_bytes(revision)
            for revision in EntryRevision.objects.filter(codex_id=codex.pk)
            .only("content", "title", "tags", "related_agent_ids", "provenance")
            .iterator(chunk_size=1000)
        )
        Codex.objects.filter(pk=codex.pk).update(
            entry_count=Entry.objects.filter(codex_id=codex.pk).count(), stored_bytes=stored
        )


class Migration(migrations.Migration):
    dependencies = [
        ("notebook", "0002_search_trigram"),
    ]

    operations = [
        migrations.AddField(
            model_name="codex",
            name="entry_count",
            field=models.PositiveBigIntegerField(default=0, help_text="Entries in this codex"),
        ),
        migrations.AddField(
            model_name="codex",
            name="stored_bytes",
            field=models.PositiveBigIntegerField(
                default=0,
                help_text="Bytes of entry input stored, every revision counted (notebook.quotas.input_bytes)",
            ),
        ),
        migrations.AddField(
            model_name="entryrevision",
            name="codex",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="notebook.codex",
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="entryrevision",
            name="codex",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="+",
                to="notebook.codex",
            ),
        ),
    ]
