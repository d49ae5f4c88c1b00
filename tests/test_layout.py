"""The direction of imports between the apps (STYLE: data flows one way; each app owns its verbs)."""

import ast
from pathlib import Path

from django.test import SimpleTestCase

ROOT = Path(__file__).resolve().parent.parent


def imported_packages(path: Path) -> set[str]:
    """Top-level packages a module imports, wherever the import statement stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def importers(package: str, of: str) -> list[str]:
    """The modules of ``package`` that import ``of``."""
    return sorted(
        str(path.relative_to(ROOT)) for path in (ROOT / package).rglob("*.py") if of in imported_packages(path)
    )


class ImportDirectionTest(SimpleTestCase):
    def test_the_notebook_imports_neither_endpoint_nor_authorization_server(self) -> None:
        self.assertEqual(importers("notebook", "mcp_endpoint"), [])
        self.assertEqual(importers("notebook", "authserver"), [])

    def test_the_authorization_server_never_imports_the_mcp_endpoint(self) -> None:
        self.assertEqual(importers("authserver", "mcp_endpoint"), [])

    def test_the_mcp_endpoint_reaches_the_authorization_server_only_through_auth(self) -> None:
        self.assertEqual(importers("mcp_endpoint", "authserver"), ["mcp_endpoint/auth.py"])


class RequirementsTest(SimpleTestCase):
    def test_test_only_packages_are_not_installed_with_the_server(self) -> None:
        runtime = (ROOT / "requirements.txt").read_text().lower()
        tests = (ROOT / "requirements-test.txt").read_text().lower()
        for package in ("selenium", "hypothesis", "hypothesis-jsonschema", "trio"):
            self.assertNotIn(f"\n{package}==", runtime)
            self.assertIn(f"\n{package}==", tests)
        self.assertIn("\n-r requirements.txt\n", tests)
