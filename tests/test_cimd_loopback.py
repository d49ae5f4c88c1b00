"""A Client ID Metadata Document on a loopback address, outside development: refused, and the
error page says why and what to do instead."""

from django.test import override_settings

from tests.live import LiveServerTestCase
from tests.oauth_helpers import REDIRECT_URI, Browser, authorization_url, pkce_pair
from tests.sdk_oauth import LoopbackMetadataServer


class LoopbackMetadataDocumentTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.make_user("alice")
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)
        self.metadata = self.enterContext(LoopbackMetadataServer())
        self.metadata.document = {
            "client_id": self.metadata.url,
            "client_name": "Local",
            "redirect_uris": [REDIRECT_URI],
        }

    def open(self):
        _, challenge = pkce_pair()
        url = authorization_url(
            self.live.base_url, self.metadata.url, code_challenge=challenge, code_challenge_method="S256"
        )
        return self.browser.open_authorization(url)

    def test_the_error_page_explains_that_loopback_documents_are_fetched_only_in_development(self) -> None:
        with override_settings(CODEX_CIMD_ALLOW_LOOPBACK=False):
            page = self.open()
        self.assertEqual(page.status_code, 400)
        self.assertIn("Invalid client_id parameter value", page.text)
        self.assertIn("metadata document on a loopback address", page.text)
        self.assertIn("CODEX_CIMD_ALLOW_LOOPBACK", page.text)
        self.assertEqual(self.metadata.requests, 0)

    def test_in_development_the_same_document_is_fetched_and_no_hint_shows(self) -> None:
        page = self.open()
        self.assertEqual(page.status_code, 200, page.text)
        self.assertNotIn("loopback address", page.text)
        self.assertEqual(self.metadata.requests, 1)
