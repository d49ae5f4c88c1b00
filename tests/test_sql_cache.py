"""The fast path's build-once cache (``notebook.sql.cache``) keeps each object's own build."""

import gc
import weakref

from django.db import DEFAULT_DB_ALIAS
from django.test import SimpleTestCase

from notebook.sql.cache import PerDatabase


class Counted(PerDatabase):
    """Counts its own builds; what it builds holds no reference to it."""

    def __init__(self) -> None:
        super().__init__()
        self.builds = 0

    def build(self, connection: object) -> object:
        self.builds += 1
        return Built()


class Built:
    """What ``Counted`` builds (a class of its own, so that a weak reference can follow it)."""


class PerDatabaseTest(SimpleTestCase):
    def test_an_object_gets_its_own_build_even_at_a_freed_objects_address(self) -> None:
        # CPython hands a freed object's address to the next object of its size, so an
        # object made after another is gone often has the same id(): the cache must not
        # give it the build of the one before (CI saw a test's fresh SearchStatements
        # answer with an earlier test's statements).
        for _ in range(50):
            statements = Counted()
            statements.built(DEFAULT_DB_ALIAS)
            self.assertEqual(statements.builds, 1)
            del statements
            gc.collect()

    def test_a_build_goes_with_its_object(self) -> None:
        # What makes the test above hold whether or not an address is reused: nothing keeps
        # a build once its object is gone, so no later object can be handed it.
        statements = Counted()
        build = weakref.ref(statements.built(DEFAULT_DB_ALIAS))
        del statements
        gc.collect()
        self.assertIsNone(build())

    def test_an_object_builds_once_per_alias(self) -> None:
        statements = Counted()
        first = statements.built(DEFAULT_DB_ALIAS)
        self.assertEqual([statements.built(DEFAULT_DB_ALIAS) for _ in range(3)], [first] * 3)
        self.assertEqual(statements.builds, 1)
