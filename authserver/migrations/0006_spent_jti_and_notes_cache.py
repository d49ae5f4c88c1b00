"""Security state no outside request can wipe: the spent one-use JWTs get a table (they were
entries of the shared cache, which culled them), and the notes that strangers' requests can make
get a cache table of their own (``CACHES["notes"]``)."""

from django.core.management import call_command
from django.db import migrations, models


def create_cache_tables(apps, schema_editor) -> None:  # noqa: ANN001
    # Makes the tables of the CACHES that have none yet (the "notes" one); never drops or empties one.
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("authserver", "0005_clientuse")]

    operations = [
        migrations.CreateModel(
            name="SpentJti",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("key", models.CharField(max_length=64, unique=True)),
                ("expires_at", models.DateTimeField(db_index=True)),
            ],
        ),
        migrations.RunPython(create_cache_tables, migrations.RunPython.noop),
    ]
