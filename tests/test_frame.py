"""The person's pages as one product (what the browser tests cannot see from outside): the
header of every page names who is signed in, error pages included; one word for the notebook
and one for a note on every page, title, message and export (docs/data.md, "Words");
revoking an application asks first, as deleting a note does; the site's icon; the admin's name."""

import re
import uuid
import zipfile
from io import BytesIO

from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory, TestCase
from oauth2_provider.models import get_access_token_model

from codex_site import errors
from mcp_endpoint import identity
from notebook import services
from notebook.validation import parse_entry_input
from tests.base import connect_application
from tests.oauth_helpers import authorization_url, pkce_pair

SIGNED_IN_AS = '<span class="visually-hidden">Signed in as </span>{}</span>'
SIGN_IN_LINK = 'href="/accounts/login/">Sign in</a>'
# The contract's words (codex, entry) a person's page must not use; "Agent Codex" is the name.
CONTRACT_WORDS = re.compile(r"\b(codex|codexes|entry|entries)\b", re.IGNORECASE)


def visible_words(html: str) -> str:
    """A page's words as a person reads them: its text and title, not its markup or addresses."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.DOTALL)
    text = re.sub(r"<[^>]+>", " ", text)
    return text.replace("Agent Codex", " ")


class HeaderTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")

    def test_a_missing_page_names_who_is_signed_in_and_offers_no_sign_in(self) -> None:
        self.client.force_login(self.alice)
        for path in ["/no-such-page/", f"/codex/entries/{uuid.uuid4()}/"]:
            with self.subTest(path=path):
                page = self.client.get(path)
                self.assertEqual(page.status_code, 404)
                self.assertContains(page, SIGNED_IN_AS.format("alice"), status_code=404)
                self.assertContains(page, ">Sign out</button>", status_code=404)
                self.assertNotContains(page, SIGN_IN_LINK, status_code=404)
                # Its sign-out form carries a CSRF token, so it signs out.
                self.assertContains(page, 'name="csrfmiddlewaretoken"', status_code=404)

    def test_the_header_sign_out_of_an_error_page_signs_out(self) -> None:
        browser = Client(enforce_csrf_checks=True)
        browser.force_login(self.alice)
        page = browser.get("/no-such-page/").content.decode()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
        browser.post("/accounts/logout/", {"csrfmiddlewaretoken": token})
        self.assertNotIn("_auth_user_id", browser.session)

    def test_signed_out_an_error_page_offers_to_sign_in(self) -> None:
        page = self.client.get("/no-such-page/")
        self.assertContains(page, SIGN_IN_LINK, status_code=404)
        self.assertNotContains(page, "Sign out", status_code=404)

    def test_a_server_error_that_cannot_tell_who_is_signed_in_names_nobody_and_offers_nothing(self) -> None:
        request = RequestFactory().get("/codex/")

        class Unreadable:
            @property
            def is_authenticated(self) -> bool:
                raise RuntimeError("the database is gone")

        request.user = Unreadable()
        page = errors.server_error(request).content.decode()
        self.assertIn("Something went wrong on the server", page)
        self.assertNotIn(SIGN_IN_LINK, page)
        self.assertNotIn("Sign out", page)

    def test_staff_see_the_admin_in_the_header_and_others_do_not(self) -> None:
        self.client.force_login(self.alice)
        self.assertNotContains(self.client.get("/"), 'href="/admin/"')
        operator = get_user_model().objects.create_user("operator", password="x", is_staff=True)
        self.client.force_login(operator)
        self.assertContains(self.client.get("/"), 'href="/admin/">Admin</a>')
        self.assertContains(self.client.get("/no-such-page/"), 'href="/admin/">Admin</a>', status_code=404)

    def test_the_admin_carries_the_sites_name(self) -> None:
        operator = get_user_model().objects.create_superuser("operator", password="x")
        self.client.force_login(operator)
        page = self.client.get("/admin/")
        self.assertContains(page, "Agent Codex administration")
        self.assertContains(page, "<title>Site administration | Agent Codex admin</title>")
        self.assertNotContains(page, "Django administration")

    def test_the_site_shows_the_servers_icon_and_favicon_ico_leads_to_it(self) -> None:
        # The icon serverInfo, the server card and server.json offer (one record: mcp_endpoint.identity).
        svg, png = f"/static/{identity.ICON_SVG}", f"/static/{identity.ICON_PNG}"
        page = self.client.get("/")
        self.assertContains(page, f'<link rel="icon" href="{svg}" type="image/svg+xml">')
        self.assertContains(page, f'<link rel="icon" href="{png}" type="image/png" sizes="256x256">')
        self.assertContains(page, f'<a class="brand" href="/"><img src="{svg}" alt="" width="20" height="20">')
        with self.assertNoLogs("django.request", level="WARNING"):
            answer = self.client.get("/favicon.ico")
        self.assertEqual((answer.status_code, answer["Location"]), (302, svg))


class OneVocabularyTest(TestCase):
    """Notebook and note: never the contract's codex and entry, on any page a person reads."""

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.client.force_login(self.alice)
        codex = services.codex_for_user(user=self.alice)
        self.entry = services.entry_save(
            codex=codex, request_id="r1", data=parse_entry_input({"title": "Plan", "content": "one"})
        )
        services.entry_save(codex=codex, request_id="r2", data=parse_entry_input({"content": "two"}))
        self.application, _ = connect_application(self.alice, "Desktop assistant")

    def assert_notebook_words(self, what: str, text: str) -> None:
        self.assertEqual(CONTRACT_WORDS.findall(text), [], f"{what}: {text}")

    def test_every_page_says_notebook_and_note(self) -> None:
        _, challenge = pkce_pair()
        client_id = self.application.client_id
        pages = [
            "/",
            "/codex/",
            "/codex/?q=nothing-matches",
            f"/codex/entries/{self.entry.id}/",
            f"/codex/entries/{self.entry.id}/?from=1&to=9",
            f"/codex/entries/{self.entry.id}/delete/",
            "/codex/import/",
            "/codex/delete-all/",
            "/account/",
            "/account/clients/",
            f"/account/clients/?revoked={self.application.pk}",
            f"/account/clients/{self.application.pk}/revoke/",
            authorization_url(
                "http://testserver", client_id, code_challenge=challenge, code_challenge_method="S256"
            ).replace("http://testserver", ""),
            "/accounts/login/",
            "/accounts/logout/",
            "/accounts/password/change/",
            f"/codex/entries/{uuid.uuid4()}/",
        ]
        for path in pages:
            with self.subTest(path=path):
                page = self.client.get(path)
                self.assertIn(page.status_code, (200, 404), path)
                self.assert_notebook_words(path, visible_words(page.content.decode()))
        self.client.logout()
        self.assert_notebook_words(
            "signed out", visible_words(self.client.get("/codex/", follow=True).content.decode())
        )

    def test_messages_say_notebook_and_note(self) -> None:
        refused = self.client.post("/codex/delete-all/", {"confirmation": "delete my codex"})
        self.assertContains(refused, "Type exactly “delete all my notes” to delete every note.", status_code=400)
        deleted = self.client.post(f"/codex/entries/{self.entry.id}/delete/", follow=True)
        self.assertContains(deleted, "Deleted “Plan” and its 1 revision.")
        cleared = self.client.post("/codex/delete-all/", {"confirmation": "delete all my notes"}, follow=True)
        self.assertContains(cleared, "Deleted all 1 note in your notebook.")
        for page in (refused, deleted, cleared):
            self.assert_notebook_words("message", visible_words(page.content.decode()))

    def test_the_exports_are_named_for_the_persons_notebook(self) -> None:
        for path, suffix in [
            ("/codex/export.json", "json"),
            ("/codex/export.md", "md"),
            ("/codex/export-markdown.zip", "markdown.zip"),
        ]:
            with self.subTest(path=path):
                answer = self.client.get(path)
                self.assertRegex(
                    answer["Content-Disposition"],
                    rf'^attachment; filename="alice-notebook-\d{{8}}-\d{{6}}\.{re.escape(suffix)}"$',
                )
                body = b"".join(answer.streaming_content)
        markdown = b"".join(self.client.get("/codex/export.md").streaming_content).decode()
        self.assertTrue(markdown.startswith("# alice's notebook\n"), markdown[:80])
        self.assert_notebook_words("Markdown export", markdown)
        zipped = zipfile.ZipFile(BytesIO(body))
        self.assertTrue(all("codex" not in name for name in zipped.namelist()), zipped.namelist())

    def test_a_name_that_is_not_ascii_still_names_the_download(self) -> None:
        self.client.force_login(get_user_model().objects.create_user("zoë", password="x"))
        answer = self.client.get("/codex/export.json")
        self.assertRegex(answer["Content-Disposition"], r"^attachment; filename\*=utf-8''zo%C3%AB-notebook-")


class RevokeAsksFirstTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.application, _ = connect_application(self.alice, "Desktop assistant")
        self.url = f"/account/clients/{self.application.pk}/revoke/"
        self.browser = Client(enforce_csrf_checks=True)
        self.browser.force_login(self.alice)

    def live_tokens(self) -> int:
        return get_access_token_model().objects.filter(user=self.alice, application=self.application).count()

    def test_the_list_links_to_a_page_that_asks_and_asking_revokes_nothing(self) -> None:
        listing = self.browser.get("/account/clients/")
        self.assertContains(listing, f'href="{self.url}"')
        self.assertNotContains(listing, f'action="{self.url}"')  # no one-click form on the list
        page = self.browser.get(self.url)
        self.assertContains(page, "Revoke access for Desktop assistant?")
        self.assertContains(page, f'<form method="post" action="{self.url}">')
        self.assertEqual(self.live_tokens(), 1)

    def test_the_post_revokes_and_without_its_csrf_token_it_is_refused(self) -> None:
        self.assertEqual(self.browser.post(self.url).status_code, 403)
        self.assertEqual(self.live_tokens(), 1)
        page = self.browser.get(self.url).content.decode()
        token = re.search(r'<main.*name="csrfmiddlewaretoken" value="([^"]+)"', page, re.DOTALL).group(1)
        answer = self.browser.post(self.url, {"csrfmiddlewaretoken": token})
        self.assertRedirects(answer, f"/account/clients/?revoked={self.application.pk}", fetch_redirect_response=False)
        self.assertFalse(
            get_access_token_model().objects.filter(user=self.alice, application=self.application).exists()
        )

    def test_an_application_this_person_never_connected_is_not_named_to_them(self) -> None:
        bob = get_user_model().objects.create_user("bob", password="bob-password")
        others, _ = connect_application(bob, "Bob's private tool")
        page = self.browser.get(f"/account/clients/{others.pk}/revoke/")
        self.assertEqual(page.status_code, 404)
        self.assertNotContains(page, "Bob's private tool", status_code=404)
