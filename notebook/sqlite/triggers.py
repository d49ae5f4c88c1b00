"""The search index's triggers on ``notebook_entry`` (SQLite, migrations 0002 and 0007),
checked rather than kept by convention.

SQLite rebuilds a table for many schema changes (adding a column with a default, for one),
and the rebuild drops the table's triggers; a migration that forgets to make them again
leaves new entries out of the trigram index, silently. So:

- ``manage.py check --database default`` (and ``migrate``, which runs the database checks
  first) reports a missing trigger (``notebook.W001``: a warning, so that ``migrate`` goes
  on to repair it);
- after ``migrate`` (``make run`` migrates on every start), ``repair_triggers`` makes any
  missing one again from migration 0007's statements and logs a warning naming it.

Both look only at a database where migration 0007 is applied; PostgreSQL has no such triggers.
"""

import importlib
import logging
from typing import Any

from django.core import checks
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.recorder import MigrationRecorder

logger = logging.getLogger(__name__)

_BATCHES = ("notebook", "0007_trigram_batches")


def _migration() -> Any:
    return importlib.import_module("notebook.migrations.0007_trigram_batches")


def expected_triggers(using: str = DEFAULT_DB_ALIAS) -> dict[str, str]:
    """The triggers this database should have, by name, with the statement that makes each
    (none unless it is SQLite with migration 0007 applied)."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        return {}
    recorder = MigrationRecorder(connection)
    if not recorder.has_table() or _BATCHES not in recorder.applied_migrations():
        return {}
    migration = _migration()
    statements = dict.fromkeys(migration.TRIGGERS, "")
    for statement in migration.CREATE_TRIGGERS:
        name = statement.split()[2]
        statements[name] = statement
    return statements


def missing_triggers(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    expected = expected_triggers(using)
    if not expected:
        return []
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        present = {name for (name,) in cursor.fetchall()}
    return [name for name in expected if name not in present]


@checks.register(checks.Tags.database)
def check_triggers(app_configs: Any, databases: Any = None, **kwargs: Any) -> list[checks.Warning]:
    errors = []
    for alias in databases or []:
        for name in missing_triggers(alias):
            errors.append(
                checks.Warning(
                    f"The SQLite trigger {name} is missing: new or changed entries would be left out of "
                    "the search index.",
                    hint="Run `manage.py migrate`, which makes missing triggers again; a migration that "
                    "rebuilds notebook_entry must drop and make them (migration 0007's drop_triggers "
                    "and create_triggers).",
                    id="notebook.W001",
                )
            )
    return errors


def repair_triggers(using: str = DEFAULT_DB_ALIAS, **kwargs: Any) -> list[str]:
    """Make every missing trigger again (the ``post_migrate`` receiver); the names made."""
    missing = missing_triggers(using)
    if missing:
        statements = expected_triggers(using)
        with connections[using].cursor() as cursor:
            for name in missing:
                cursor.execute(statements[name])
        logger.warning("Made the missing SQLite trigger(s) %s again", ", ".join(missing))
    return missing
