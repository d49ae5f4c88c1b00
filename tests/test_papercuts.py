"""The account side's papercuts, each a sentence a person read wrongly: fixed, and kept so."""

from django.contrib.auth import get_user_model
from django.test import TestCase

from notebook import services
from notebook.validation import parse_entry_input


class PapercutTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.codex = services.codex_for_user(user=self.alice)
        self.client.force_login(self.alice)

    def save(self, request_id: str, content: str, **entry):
        return services.entry_save(
            codex=self.codex, request_id=request_id, data=parse_entry_input({"content": content, **entry})
        )

    def test_a_whole_note_in_non_ascii_text_has_no_ellipsis_and_a_cut_one_has(self) -> None:
        self.save("short", "Überprüfung der Grüße: ✓ 東京")
        self.save("long", "ü" * 200)
        page = self.client.get("/codex/").content.decode()
        self.assertIn("Überprüfung der Grüße: ✓ 東京</p>", page)
        self.assertIn("ü" * 160 + "…</p>", page)

    def test_a_note_of_one_revision_says_so(self) -> None:
        entry = self.save("one", "one")
        page = self.client.get(f"/codex/entries/{entry.id}/delete/")
        self.assertContains(page, "its one revision")
        self.assertNotContains(page, "all 1 of")

    def test_an_empty_search_on_the_only_page_does_not_speak_of_pages(self) -> None:
        self.save("a", "apple")
        self.save("b", "banana")
        page = self.client.get("/codex/", {"q": "cherry"})
        self.assertContains(page, "No notes match, of 2 in your notebook")
        self.assertNotContains(page, "on this page")

    def test_signing_out_by_get_asks_instead_of_a_bare_405(self) -> None:
        page = self.client.get("/accounts/logout/")
        self.assertEqual(page.status_code, 200)
        self.assertContains(page, "Sign out?")
        self.assertContains(page, "<title>")
        self.assertIn("_auth_user_id", self.client.session)

    def test_the_sign_in_page_says_who_is_signed_in(self) -> None:
        page = self.client.get("/accounts/login/")
        self.assertContains(page, "You are signed in as <strong>alice</strong>")

    def test_the_header_names_who_is_signed_in_and_says_sign_out_plainly(self) -> None:
        page = self.client.get("/codex/").content.decode()
        self.assertIn('<span class="visually-hidden">Signed in as </span>alice</span>', page)
        self.assertIn(">Account</a>", page)
        self.assertIn(">Sign out</button>", page)
        self.assertNotIn("Sign out alice", page)

    def test_the_password_change_is_the_sites_own_page_and_linked_from_the_account(self) -> None:
        self.assertContains(self.client.get("/account/"), 'href="/accounts/password/change/"')
        self.assertRedirects(
            self.client.get("/accounts/password_change/"), "/accounts/password/change/", fetch_redirect_response=False
        )
        page = self.client.get("/accounts/password/change/")
        self.assertEqual(page.status_code, 200)
        self.assertNotContains(page, "Django administration")
        self.assertNotContains(page, "/admin/")
        self.assertContains(page, 'href="/codex/"')

    def test_a_password_change_checks_the_current_password_through_the_throttle(self) -> None:
        for attempt in range(5):
            self.client.post(
                "/accounts/password/change/",
                {"oldpassword": f"wrong-{attempt}", "password1": "a-new-pass-phrase", "password2": "a-new-pass-phrase"},
            )
        page = self.client.post(
            "/accounts/password/change/",
            {"oldpassword": "alice-password", "password1": "a-new-pass-phrase", "password2": "a-new-pass-phrase"},
        )
        self.assertEqual(page.status_code, 200)
        self.assertContains(page, "try again in")
        self.alice.refresh_from_db()
        self.assertTrue(self.alice.check_password("alice-password"))

    def test_the_admins_password_change_is_the_sites_throttled_one(self) -> None:
        operator = get_user_model().objects.create_superuser("operator", password="operator-password")
        self.client.force_login(operator)
        self.assertRedirects(
            self.client.get("/admin/password_change/"), "/accounts/password/change/", fetch_redirect_response=False
        )
