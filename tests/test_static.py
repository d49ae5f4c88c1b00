"""Static files as production serves them: ``collectstatic`` with WhiteNoise's compressed
manifest storage, then the application itself (WhiteNoise's middleware) answers /static/.

The test runner serves the finders instead (tests do not collect); these tests collect into a
temporary STATIC_ROOT with the production settings and ask a fresh Django handler, which
builds its WhiteNoise middleware from them."""

import gzip
import json
import re
import shutil
import tempfile
from pathlib import Path

import httpx2
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, SimpleTestCase, TestCase, override_settings

from codex_site import settings as production_settings
from mcp_endpoint import identity
from tests.server_process import ServerProcess, database_environment

# What production configures (the test runner serves the finders instead).
PRODUCTION_STORAGES = production_settings.STORAGES


class CollectedStaticFilesTests(TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.root = Path(tempfile.mkdtemp(prefix="codex-static-"))
        cls.enterClassContext(
            override_settings(STATIC_ROOT=cls.root, STORAGES=PRODUCTION_STORAGES, WHITENOISE_USE_FINDERS=False)
        )
        call_command("collectstatic", interactive=False, verbosity=0)

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.root, ignore_errors=True)
        super().tearDownClass()

    def stylesheets(self, client: Client, path: str) -> list[str]:
        page = client.get(path)
        self.assertEqual(page.status_code, 200)
        return re.findall(r'<link rel="stylesheet" href="([^"]+)"', page.content.decode())

    def test_the_admin_links_hashed_names_that_the_application_serves_compressed_and_cached_for_a_year(self) -> None:
        client = Client()
        # The admin signs in on the site's page, which links the site's own stylesheet, hashed too.
        self.assertRegex(self.stylesheets(client, "/accounts/login/")[0], r"^/static/codex/site\.[0-9a-f]{12}\.css$")
        client.force_login(get_user_model().objects.create_superuser("root", password="x"))
        sheets = self.stylesheets(client, "/admin/")
        base = next(href for href in sheets if "/admin/css/base." in href)
        self.assertRegex(base, r"^/static/admin/css/base\.[0-9a-f]{12}\.css$")

        answer = client.get(base, headers={"accept-encoding": "gzip"})
        self.assertEqual(answer.status_code, 200)
        self.assertEqual(answer["Content-Type"], 'text/css; charset="utf-8"')
        self.assertEqual(answer["Content-Encoding"], "gzip")
        self.assertIn("immutable", answer["Cache-Control"])
        self.assertIn("max-age=315360000", answer["Cache-Control"])
        body = gzip.decompress(b"".join(answer.streaming_content))
        self.assertEqual(body, (self.root / base.removeprefix("/static/")).read_bytes())
        self.assertIn(b"--primary:", body)

    def test_every_stylesheet_of_an_admin_page_is_served(self) -> None:
        client = Client()
        client.force_login(get_user_model().objects.create_superuser("operator", password="x"))
        sheets = self.stylesheets(client, "/admin/")
        self.assertGreaterEqual(len(sheets), 3)
        for href in sheets:
            with self.subTest(href=href):
                answer = client.get(href)
                self.assertEqual(answer.status_code, 200)
                b"".join(answer.streaming_content)

    def test_the_icons_serverinfo_names_are_served_by_their_plain_names(self) -> None:
        # serverInfo, the server card and server.json link the plain names, which outlive a
        # release (the hashed ones change with the file): collectstatic keeps them beside.
        for icon in identity.DOCUMENTED.icons():
            path = icon["src"].removeprefix(identity.DOCUMENTED.public_url)
            with self.subTest(path=path):
                answer = Client().get(path)
                self.assertEqual(answer.status_code, 200)
                self.assertEqual(answer["Content-Type"].split(";")[0], icon["mimeType"])
                b"".join(answer.streaming_content)

    def test_an_unknown_static_file_is_a_404(self) -> None:
        self.assertEqual(Client().get("/static/admin/css/no-such-file.css").status_code, 404)


class NothingCollectedTests(TestCase):
    """A server started before ``collectstatic`` (or on files an older release collected) serves
    the sign-in page (the admin's too) unstyled, as docs/deploy.md says, and names the missing
    step: never a 500 from the manifest storage's ``Missing staticfiles manifest entry``."""

    def setUp(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="codex-static-empty-"))
        self.addCleanup(shutil.rmtree, self.root, ignore_errors=True)

    def test_the_admin_sign_in_answers_unstyled_and_the_log_names_collectstatic(self) -> None:
        with (
            override_settings(STATIC_ROOT=self.root, STORAGES=PRODUCTION_STORAGES, WHITENOISE_USE_FINDERS=False),
            self.assertLogs("codex_site.staticfiles", "WARNING") as logged,
        ):
            page = Client().get("/admin/login/", follow=True)
        self.assertEqual(page.redirect_chain[-1][0].split("?")[0], "/accounts/login/")
        self.assertEqual(page.status_code, 200)
        self.assertIn('href="/static/codex/site.css"', page.content.decode())
        self.assertIn("manage.py collectstatic", "\n".join(logged.output))

    def test_a_name_that_is_no_static_file_still_raises_without_a_warning(self) -> None:
        # WhiteNoise asks about names it derives from collected ones ("select2.full.js" less
        # what looks like a hash) and relies on the ValueError.
        from django.contrib.staticfiles.storage import staticfiles_storage

        with override_settings(STATIC_ROOT=self.root, STORAGES=PRODUCTION_STORAGES, WHITENOISE_USE_FINDERS=False):
            with self.assertRaises(ValueError), self.assertNoLogs("codex_site.staticfiles"):
                staticfiles_storage.url("admin/js/vendor/select2/select2.js")

    def test_a_file_an_older_collection_lacks_is_linked_by_its_plain_name(self) -> None:
        production = override_settings(
            STATIC_ROOT=self.root, STORAGES=PRODUCTION_STORAGES, WHITENOISE_USE_FINDERS=False
        )
        with production:
            call_command("collectstatic", interactive=False, verbosity=0)
        manifest = self.root / "staticfiles.json"
        data = json.loads(manifest.read_text())
        del data["paths"]["admin/css/base.css"]
        manifest.write_text(json.dumps(data))
        operator = get_user_model().objects.create_superuser("operator", password="operator-password")
        client = Client()
        client.force_login(operator)
        # A fresh storage (as a restarted worker has) reads the edited manifest.
        with production, self.assertLogs("codex_site.staticfiles", "WARNING"):
            page = client.get("/admin/")
        self.assertEqual(page.status_code, 200)
        sheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', page.content.decode())
        self.assertIn("/static/admin/css/base.css", sheets)
        # The rest are still the collected, hashed names.
        self.assertTrue(any(re.search(r"\.[0-9a-f]{12}\.css$", href) for href in sheets), sheets)


class ServerStartedWithoutCollectstaticTest(SimpleTestCase):
    databases = {"default"}

    def test_its_admin_sign_in_is_served_and_its_log_names_the_missing_step(self) -> None:
        directory = Path(tempfile.mkdtemp(prefix="codex-static-server-"))
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        log_path = directory / "server.log"
        (directory / "static").mkdir()  # nothing collected (ServerProcess links a collection otherwise)
        with open(log_path, "wb") as output:
            server = ServerProcess(directory, database_environment(), output=output)
            server.start()
            try:
                with httpx2.Client(base_url=server.base_url, timeout=30, follow_redirects=True) as client:
                    page = client.get("/admin/login/")  # the site's sign-in page, which the admin sends to
                    sheet = client.get("/static/codex/site.css")
            finally:
                server.stop()
        self.assertEqual(page.status_code, 200)
        self.assertEqual(page.url.path, "/accounts/login/")
        self.assertIn('href="/static/codex/site.css"', page.text)
        self.assertEqual(sheet.status_code, 404)  # unstyled until collected
        self.assertFalse((directory / "static" / "staticfiles.json").exists())
        log = log_path.read_text()
        self.assertIn("manage.py collectstatic", log)
        self.assertNotIn("Traceback", log)
