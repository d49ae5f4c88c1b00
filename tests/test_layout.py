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


def imported_modules(path: Path) -> set[str]:
    """Dotted modules a module imports (``from a.b import c`` counts as ``a.b`` and ``a.b.c``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_importers(prefix: str) -> list[str]:
    """Files of the project (tests and migrations aside) that import ``prefix`` or a module under it."""
    found = []
    for path in ROOT.rglob("*.py"):
        relative = path.relative_to(ROOT)
        if relative.parts[0] in {".venv", "tests"} or "migrations" in relative.parts:
            continue
        if any(name == prefix or name.startswith(prefix + ".") for name in imported_modules(path)):
            found.append(str(relative))
    return sorted(found)


APPS = ("notebook", "authserver", "mcp_endpoint", "mycodex")


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

    def test_no_app_imports_the_site_that_wires_them(self) -> None:
        for app in APPS:
            with self.subTest(app=app):
                self.assertEqual(importers(app, "codex_site"), [])

    def test_the_metrics_lie_below_everything(self) -> None:
        # Every app may call codex_metrics' hooks, so it imports nothing of the project.
        for above in (*APPS, "codex_site", "common"):
            with self.subTest(above=above):
                self.assertEqual(importers("codex_metrics", above), [])

    def test_common_lies_below_every_app(self) -> None:
        for above in (*APPS, "codex_site"):
            with self.subTest(above=above):
                self.assertEqual(importers("common", above), [])

    def test_the_fast_path_is_reached_only_through_its_seam(self) -> None:
        # The services and selectors go through notebook.store; the token check is authserver's.
        self.assertEqual(
            [path for path in module_importers("notebook.sql") if not path.startswith("notebook/sql/")],
            ["authserver/core/token_check.py", "notebook/store.py"],
        )
        self.assertEqual(
            [path for path in module_importers("notebook.sqlite") if not path.startswith("notebook/sqlite/")],
            ["notebook/apps.py", "notebook/transactions.py"],
        )
        self.assertEqual(module_importers("notebook.orm"), ["notebook/selectors.py", "notebook/store.py"])

    def test_the_mcp_endpoint_uses_the_notebook_only_through_its_services_and_selectors(self) -> None:
        seam = ("notebook.sql", "notebook.sqlite", "notebook.orm", "notebook.store")
        for path in (ROOT / "mcp_endpoint").rglob("*.py"):
            with self.subTest(path=str(path.relative_to(ROOT))):
                self.assertEqual([name for name in imported_modules(path) if name.startswith(seam)], [])


# The authorization server's rooms, from the top down (docs/architecture.md, "Where each rule
# lives"): a room imports only the rooms below it. The app's Django faces (apps, models, admin,
# signals, urls, management commands, migrations) stand at its top level and may import any room.
AUTHSERVER_ROOMS = ("oauth", "enterprise", "people", "clients", "core")


def room_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "authserver" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in AUTHSERVER_ROOMS else None


class AuthserverRoomsTest(SimpleTestCase):
    def test_every_module_of_the_authorization_server_stands_in_a_room_or_is_a_django_face(self) -> None:
        faces = {"__init__.py", "apps.py", "models.py", "admin.py", "signals.py", "urls.py"}
        loose = [path.name for path in (ROOT / "authserver").glob("*.py") if path.name not in faces]
        self.assertEqual(loose, [])

    def test_each_room_imports_only_the_rooms_below_it(self) -> None:
        for index, room in enumerate(AUTHSERVER_ROOMS):
            below = set(AUTHSERVER_ROOMS[index + 1 :])
            for path in (ROOT / "authserver" / room).rglob("*.py"):
                if "migrations" in path.parts:
                    continue
                reached = {room_of(name) for name in imported_modules(path)} - {None, room}
                with self.subTest(path=str(path.relative_to(ROOT))):
                    self.assertLessEqual(reached, below)

    def test_rate_limiting_lies_below_the_apps(self) -> None:
        self.assertFalse((ROOT / "authserver" / "ratelimit.py").exists())
        self.assertEqual(imported_packages(ROOT / "common" / "ratelimit.py") & set(APPS), set())


class NoImportCycleTest(SimpleTestCase):
    def test_no_two_modules_of_the_project_import_each_other_however_indirectly(self) -> None:
        modules: dict[str, Path] = {}
        for path in ROOT.rglob("*.py"):
            relative = path.relative_to(ROOT)
            if relative.parts[0] in {".venv", "tests", "var"} or "migrations" in relative.parts:
                continue
            name = ".".join(relative.with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
        graph = {
            name: {imported for imported in imported_modules(path) if imported in modules and imported != name}
            for name, path in modules.items()
        }
        cycles = []
        state: dict[str, int] = {}  # 1: on the current path, 2: done

        def visit(name: str, trail: list[str]) -> None:
            state[name] = 1
            for imported in sorted(graph[name]):
                if state.get(imported) == 1:
                    cycles.append([*trail[trail.index(imported) :], imported])
                elif imported not in state:
                    visit(imported, [*trail, imported])
            state[name] = 2

        for name in sorted(graph):
            if name not in state:
                visit(name, [name])
        self.assertEqual(cycles, [])


class RequirementsTest(SimpleTestCase):
    def test_test_only_packages_are_not_installed_with_the_server(self) -> None:
        runtime = (ROOT / "requirements.txt").read_text().lower()
        tests = (ROOT / "requirements-test.txt").read_text().lower()
        for package in ("selenium", "hypothesis", "hypothesis-jsonschema", "trio"):
            self.assertNotIn(f"\n{package}==", runtime)
            self.assertIn(f"\n{package}==", tests)
        self.assertIn("\n-r requirements.txt\n", tests)


class ReadmeTest(SimpleTestCase):
    def test_the_readme_stays_short_enough_for_a_newcomer(self) -> None:
        lines = (ROOT / "README.md").read_text().splitlines()
        self.assertLessEqual(len(lines), 200, "README.md is for a newcomer: move detail to docs/")
