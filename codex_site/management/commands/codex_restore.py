"""manage.py codex_restore PATH: load a codex_backup file into the configured database."""

import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DEFAULT_DB_ALIAS, connections

from codex_site import backup
from codex_site.management.commands.codex_backup import server_major


def postgres_tables(connection) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'")
        return cursor.fetchone()[0]


class Command(BaseCommand):
    help = (
        "Restore a codex_backup file into the configured database. Stop the server first. "
        "SQLite: written to the configured path, which must not hold a database unless --force. "
        "PostgreSQL: pg_restore in one transaction into an empty database, or with --clean into one "
        "whose objects are dropped first."
    )
    # The database may be empty (or hold another release's tables): nothing to check yet.
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="a file written by codex_backup")
        parser.add_argument("--database", default=DEFAULT_DB_ALIAS, help="database alias (default: default)")
        parser.add_argument(
            "--force",
            "--clean",
            action="store_true",
            dest="force",
            help="replace an existing database (SQLite) or drop the backup's objects first (PostgreSQL)",
        )

    def handle(self, *args, path: str, database: str, force: bool, **options) -> None:
        connection = connections[database]
        source = Path(path).resolve()
        started = time.monotonic()
        try:
            if connection.vendor == "sqlite":
                target = Path(connection.settings_dict["NAME"]).resolve()
                connection.close()
                outcome = backup.sqlite_restore(source, target, force=force)
                where = target
            elif connection.vendor == "postgresql":
                major, tables = server_major(connection), postgres_tables(connection)
                connection.close()
                outcome = backup.pg_restore(connection.settings_dict, major, source, tables=tables, clean=force)
                where = connection.settings_dict["NAME"]
            else:
                raise CommandError(f"no restore for the {connection.vendor} backend")
        except backup.BackupError as error:
            raise CommandError(str(error)) from None
        seconds = time.monotonic() - started
        self.stdout.write(f"restored {source} into {where} in {seconds:.1f} s ({outcome.detail})")
