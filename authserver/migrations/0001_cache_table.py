"""Create the database cache table (rate-limit counters, DOT's metadata-fetch backoff)
as part of `migrate`, so no separate `createcachetable` step is ever forgotten."""

from django.core.management import call_command
from django.db import migrations


def create_cache_table(apps, schema_editor) -> None:  # noqa: ANN001
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies: list = []
    operations = [migrations.RunPython(create_cache_table, migrations.RunPython.noop)]
