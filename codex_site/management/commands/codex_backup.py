"""manage.py codex_backup PATH: an online, consistent backup of the whole database."""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

from codex_site import backup


def server_major(connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version_num")
        return int(cursor.fetchone()[0]) // 10_000


class Command(BaseCommand):
    help = (
        "Back up the configured database to PATH while the server keeps serving: on SQLite a "
        "checked online copy (one file), on PostgreSQL a pg_dump custom-format archive."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="file to write (replaced only once the new backup is whole)")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="database alias (default: default)")

    def handle(self, *args, path: str, database: str, **options) -> None:
        connection = connections[database]
        target = Path(path).resolve()
        if target.is_dir():
            raise CommandError(f"{target} is a directory; give the backup file's path")
        if not target.parent.is_dir():
            raise CommandError(f"{target.parent} does not exist")
        started = time.monotonic()
        try:
            if connection.vendor == "sqlite":
                source = Path(connection.settings_dict["NAME"]).resolve()
                if source == target:
                    raise CommandError("the backup path is the database itself")
                outcome = backup.sqlite_backup(source, target)
            elif connection.vendor == "postgresql":
                outcome = backup.pg_backup(connection.settings_dict, server_major(connection), target)
            else:
                raise CommandError(f"no backup for the {connection.vendor} backend")
        except backup.BackupError as error:
            raise CommandError(str(error)) from None
        finally:
            connection.close()
        seconds = time.monotonic() - started
        self.stdout.write(f"backed up to {outcome.path}: {outcome.bytes:,} bytes in {seconds:.1f} s ({outcome.detail})")
