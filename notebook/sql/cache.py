"""The fast path's one build-once-per-database cache.

Every statement the fast path sends is built from the models' metadata and the backend's
operations the first time it is used on a database alias, and kept for the life of the
object that built it (the module-level statement objects live as long as the process):
``PerDatabase.built(alias)`` runs ``build`` once per alias and object.
"""

from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper


class PerDatabase:
    """Statements built once per database alias: ``build`` runs on first use of an alias.

    The builds live on the object itself, never in a table keyed by ``id()``: an address is
    handed to a new object once the old one is freed, and the new one must not be given the
    old one's statements.
    """

    def __init__(self) -> None:
        self._builds: dict[str, Any] = {}

    def built(self, alias: str) -> Any:
        built = self._builds.get(alias)
        if built is None:
            built = self._builds[alias] = self.build(connections[alias])
        return built

    def build(self, connection: BaseDatabaseWrapper) -> Any:
        raise NotImplementedError
