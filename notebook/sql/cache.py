"""The fast path's one build-once-per-database cache.

Every statement the fast path sends is built from the models' metadata and the backend's
operations the first time it is used on a database alias, and kept here for the life of
the process: ``PerDatabase.built(alias)`` runs ``build`` once per alias and object.
"""

from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

# (the statement object, the alias) -> what its ``build`` made.
_BUILT: dict[tuple[int, str], Any] = {}


class PerDatabase:
    """Statements built once per database alias: ``build`` runs on first use of an alias."""

    def built(self, alias: str) -> Any:
        key = (id(self), alias)
        built = _BUILT.get(key)
        if built is None:
            built = _BUILT[key] = self.build(connections[alias])
        return built

    def build(self, connection: BaseDatabaseWrapper) -> Any:
        raise NotImplementedError
