"""Error pages in the site's style, saying what happened and what to do, whether or not
DEBUG is on (``make run`` turns it on); API paths keep their JSON errors."""

import uuid

from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory, TestCase, override_settings
from django.urls import get_resolver

from codex_site import errors

SITE = 'href="#main">Skip to content</a>'  # the site's own page frame (templates/base.html)


class ErrorPagesTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")

    def assert_site_page(self, response, status: int, *words: str) -> None:
        self.assertEqual(response.status_code, status)
        self.assertTrue(response["Content-Type"].startswith("text/html"), response["Content-Type"])
        text = response.content.decode()
        self.assertIn(SITE, text)
        for word in words:
            self.assertIn(word, text)
        for django_words in ("Page not found (404)", "CSRF verification failed", "Using the URLconf", "Traceback"):
            self.assertNotIn(django_words, text)

    def test_a_missing_page_is_a_site_page_with_or_without_debug(self) -> None:
        for debug in (False, True):
            with self.subTest(debug=debug), override_settings(DEBUG=debug):
                self.assert_site_page(self.client.get("/no-such-page/"), 404, "This page does not exist")
                self.client.force_login(self.alice)
                missing_entry = self.client.get(f"/codex/entries/{uuid.uuid4()}/")
                # Signed in, the error page's header says so (it did not: "a 404 looks signed out").
                self.assert_site_page(missing_entry, 404, "My notebook", "Signed in as </span>alice", ">Sign out<")
                self.client.logout()

    def test_api_paths_keep_json_errors(self) -> None:
        for debug in (False, True):
            for path in ["/o/no-such-endpoint/", "/.well-known/no-such-document", "/o/register/nobody/x/"]:
                with self.subTest(path=path, debug=debug), override_settings(DEBUG=debug):
                    response = self.client.get(path)
                    self.assertEqual(response.status_code, 404)
                    self.assertEqual(response.json()["error"], "not_found")

    def test_a_consent_page_sent_after_signing_out_elsewhere_says_it_expired(self) -> None:
        for debug in (False, True):
            with self.subTest(debug=debug), override_settings(DEBUG=debug):
                browser = Client(enforce_csrf_checks=True)
                browser.force_login(self.alice)
                response = browser.post("/o/authorize/?client_id=x&response_type=code", {"allow": "Authorize"})
                self.assert_site_page(
                    response, 403, "This page expired", "go back to the application and connect again"
                )
                signin = Client(enforce_csrf_checks=True).post("/accounts/login/", {"login": "alice"})
                self.assert_site_page(signin, 403, "This page expired", "reload")

    def test_the_server_error_page_says_what_to_do_and_api_paths_get_json(self) -> None:
        self.assertIs(get_resolver().resolve_error_handler(500), errors.server_error)
        self.assertIs(get_resolver().resolve_error_handler(400), errors.bad_request)
        self.assertIs(get_resolver().resolve_error_handler(403), errors.permission_denied)
        page = errors.server_error(RequestFactory().get("/codex/"))
        self.assert_site_page(page, 500, "Something went wrong on the server", "try again")
        api = errors.server_error(RequestFactory().post("/o/token/"))
        self.assertEqual((api.status_code, api["Content-Type"]), (500, "application/json"))
        bad = errors.bad_request(RequestFactory().get("/codex/"), ValueError("x"))
        self.assert_site_page(bad, 400, "could not be understood")
        refused = errors.permission_denied(RequestFactory().get("/admin/"), PermissionError())
        self.assert_site_page(refused, 403, "not allowed")
