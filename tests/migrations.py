"""Moving the test database to a migration and back, for the tests of data migrations."""

import datetime as dt

from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]):
    """Migrate the test database to ``targets``; the apps of that state."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def before(migration: tuple[str, str]) -> list[tuple[str, str]]:
    """What ``migration`` follows in its app, whatever the branches were rechained to."""
    graph = MigrationExecutor(connection).loader.graph
    return [node.key for node in graph.node_map[migration].parents if node.key[0] == migration[0]]


def latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def old_entry(apps, codex, content: str, moment: dt.datetime):
    """An entry made with the historical model, its content searchable."""
    return apps.get_model("notebook", "Entry").objects.create(
        codex=codex,
        revision=1,
        content=content,
        content_bytes=len(content),
        search_content=content,
        created_at=moment,
        updated_at=moment,
    )
