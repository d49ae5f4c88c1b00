"""Static files as production serves them: ``collectstatic`` with WhiteNoise's compressed
manifest storage, then the application itself (WhiteNoise's middleware) answers /static/.

The test runner serves the finders instead (tests do not collect); these tests collect into a
temporary STATIC_ROOT with the production settings and ask a fresh Django handler, which
builds its WhiteNoise middleware from them."""

import gzip
import re
import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, TestCase, override_settings

PRODUCTION_STORAGES = {
    **settings.STORAGES,
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}


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
        import shutil

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

    def test_an_unknown_static_file_is_a_404(self) -> None:
        self.assertEqual(Client().get("/static/admin/css/no-such-file.css").status_code, 404)
