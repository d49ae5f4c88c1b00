"""The register of Django, DOT and SDK internals (common.internals) guards upgrades: it fails
when an installed library is not a version its entries were checked against, and when an
entry names code that is no longer there."""

from importlib.metadata import version
from pathlib import Path

from django.test import SimpleTestCase

from common import internals

ROOT = Path(__file__).resolve().parent.parent


class InternalsRegisterTest(SimpleTestCase):
    def test_every_library_is_a_version_its_entries_were_checked_against(self) -> None:
        for library, checked in internals.CHECKED.items():
            with self.subTest(library=library):
                self.assertIn(
                    version(library),
                    checked,
                    f"{library} {version(library)} is installed: re-read the entries of common/internals.py "
                    f"for {library} in this release, then add it to CHECKED",
                )

    def test_every_entry_names_code_that_is_there(self) -> None:
        self.assertTrue(internals.REGISTER)
        for entry in internals.REGISTER:
            self.assertIn(entry.library, internals.CHECKED)
            for where in entry.where:
                with self.subTest(what=entry.what, where=where):
                    self.assertIn(entry.needle, (ROOT / where).read_text())
