"""The fast path's build-once cache (``notebook.sql.cache``) keeps each object's own build."""

import gc

from django.db import DEFAULT_DB_ALIAS
from django.test import SimpleTestCase

from notebook.sql.cache import PerDatabase


class Counted(PerDatabase):
    """Counts its own builds; what it builds holds no reference to it."""

    def __init__(self) -> None:
        self.builds = 0

    def build(self, connection: object) -> object:
        self.builds += 1
        return object()


class PerDatabaseTest(SimpleTestCase):
    def test_an_object_gets_its_own_build_even_at_a_freed_objects_address(self) -> None:
        # CPython hands a freed object's address to the next object of its size, so an
        # object made after another is gone often has the same id(): the cache must not
        # give it the build of the one before (CI saw a test's fresh SearchStatements
        # answer with an earlier test's statements).
        addresses = set()
        for _ in range(50):
            statements = Counted()
            addresses.add(id(statements))
            statements.built(DEFAULT_DB_ALIAS)
            self.assertEqual(statements.builds, 1)
            del statements
            gc.collect()
        self.assertLess(len(addresses), 50, "no address was reused, so this run proved nothing")

    def test_an_object_builds_once_per_alias(self) -> None:
        statements = Counted()
        first = statements.built(DEFAULT_DB_ALIAS)
        self.assertEqual([statements.built(DEFAULT_DB_ALIAS) for _ in range(3)], [first] * 3)
        self.assertEqual(statements.builds, 1)
