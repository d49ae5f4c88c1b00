"""Signing in and out as a person meets it: the sign-in page says why it is asked for, a
sign-in lands on My notebook, My notebook counts every note, and signing out says so."""

from django.contrib.auth import get_user_model
from django.test import TestCase

from notebook import services
from notebook.validation import parse_entry_input

CONSENT_WORDS = "An application wants to use your notebook"


class SignInPageTest(TestCase):
    def test_only_the_authorization_flow_says_an_application_wants_access(self) -> None:
        authorize = "/o/authorize/?client_id=abc&response_type=code"
        asked = self.client.get("/accounts/login/", {"next": authorize})
        self.assertContains(asked, CONSENT_WORDS)
        for next_path in ["/codex/", "/account/clients/", "/codex/entries/11111111-1111-4111-8111-111111111111/"]:
            with self.subTest(next=next_path):
                page = self.client.get("/accounts/login/", {"next": next_path})
                self.assertNotContains(page, CONSENT_WORDS)
                self.assertContains(page, "Sign in to see that page")
        plain = self.client.get("/accounts/login/")
        self.assertNotContains(plain, CONSENT_WORDS)
        self.assertNotContains(plain, "Sign in to see that page")

    def test_signing_in_without_a_next_page_lands_on_my_codex(self) -> None:
        get_user_model().objects.create_user("alice", password="alice-password")
        response = self.client.post("/accounts/login/", {"login": "alice", "password": "alice-password"})
        self.assertRedirects(response, "/codex/", fetch_redirect_response=False)

    def test_signing_out_says_so(self) -> None:
        alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.client.force_login(alice)
        response = self.client.post("/accounts/logout/", follow=True)
        self.assertContains(response, "You are signed out")
        self.assertContains(response, 'role="status"')
        self.assertNotIn("_auth_user_id", self.client.session)


class MyCodexCountTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.codex = services.codex_for_user(user=self.alice)
        self.client.force_login(self.alice)

    def save(self, number: int, **entry) -> None:
        services.entry_save(
            codex=self.codex, request_id=f"r{number}", data=parse_entry_input({"content": f"note {number}", **entry})
        )

    def test_my_codex_says_how_many_notes_there_are_in_all(self) -> None:
        for number in range(3):
            self.save(number)
        self.assertContains(self.client.get("/codex/"), "3 notes in your notebook")
        for number in range(3, 25):
            self.save(number, tags=["many"] if number % 2 else [])
        page = self.client.get("/codex/")
        self.assertContains(page, "20 notes on this page, of 25 in your notebook")
        filtered = self.client.get("/codex/", {"tag": "many"})
        self.assertContains(filtered, "11 notes match, of 25 in your notebook")  # one page holds them all
