"""Every page, as a person sees it in headless Chromium at 1280x900 and on a 390x844 phone:
nothing wider than the screen (document.documentElement.scrollWidth > clientWidth fails),
no axe-core violation, and a whole-page screenshot of each in var/screenshots/pages-*.png.

The notebook holds what makes pages wide: a long unbroken title, tag, related agent id, URL
and application name; two connected applications and a command-line token; three revisions.
"""

import datetime as dt

from django.contrib.auth import get_user_model
from django.test import override_settings
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions

from authserver.tokens import mint_access_token
from mcp_endpoint.auth import check_bearer_token, writer_of
from notebook import services
from notebook.validation import parse_entry_input
from tests.base import connect_application
from tests.browser import VIEWPORTS, BrowserPages, PageChecks, headless_chromium
from tests.live import LiveServerTestCase
from tests.oauth_helpers import authorization_url, pkce_pair, register_client
from tests.oidc import sso_settings
from tests.served import free_port

LONG_WORD = "Pneumonoultramicroscopicsilicovolcanoconiosis" * 2
LONG_TAG = ("field-notes-" * 6)[:64]
LONG_AGENT = "agent://" + "x" * 180
LONG_URL = "https://example.org/" + "path/" * 40 + "?query=" + "q" * 60


class EveryPageFitsAndPassesAxeTest(BrowserPages, PageChecks, LiveServerTestCase):
    screenshot_prefix = "pages"

    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        User = get_user_model()
        self.alice = self.make_user("alice")
        User.objects.create_superuser("operator", password="operator-password")
        codex = services.codex_for_user(user=self.alice)
        application, raw = connect_application(
            self.alice, "Desktop assistant with a name long enough to wrap on a phone screen"
        )
        desktop = writer_of(check_bearer_token(raw))
        minted = mint_access_token(
            user=self.alice, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=1)
        )
        entry = {
            "title": f"Launch plan {LONG_WORD}",
            "content": f"Step one: read {LONG_URL}\nStep two: check the signs.",
            "tags": ["launch", LONG_TAG],
            "relatedAgentIds": [LONG_AGENT],
            "provenance": {"source": LONG_URL},
        }
        self.entry = services.entry_save(codex=codex, request_id="r1", data=parse_entry_input(entry), writer=desktop)
        for revision, content in [(1, "Step one: done.\nStep two: check the signs."), (2, "Step one: done.")]:
            services.entry_update(
                codex=codex,
                entry_id=self.entry.id,
                expected_revision=revision,
                data=parse_entry_input({**entry, "content": content}),
                writer=writer_of(check_bearer_token(minted)),
            )
        for number in range(3):
            services.entry_save(
                codex=codex, request_id=f"n{number}", data=parse_entry_input({"content": f"note {number}"})
            )
        self.client_id = register_client(self.live.base_url).json()["client_id"]
        self.application = application

    def visit(self, path: str) -> None:
        self.web.get(self.live.base_url + path)
        self.wait().until(expected_conditions.presence_of_element_located((By.TAG_NAME, "body")))

    def check_every_page(self, pages: list[tuple[str, str]], *, axe: bool = True) -> list[str]:
        problems = []
        for viewport in VIEWPORTS:
            self.use_viewport(viewport)
            for name, path in pages:
                self.visit(path)
                problems += self.problems_of_page(name, viewport, axe=axe)
        return problems

    def test_every_page_fits_both_screens_and_has_no_accessibility_violation(self) -> None:
        entry = f"/codex/entries/{self.entry.id}/"
        _, challenge = pkce_pair()
        consent = authorization_url(
            self.live.base_url, self.client_id, code_challenge=challenge, code_challenge_method="S256"
        ).removeprefix(self.live.base_url)
        problems = self.check_every_page(
            [
                ("home-signed-out", "/"),
                ("sign-in", "/accounts/login/"),
                ("sign-in-for-a-page", "/accounts/login/?next=/codex/"),
                ("not-found-signed-out", "/no-such-page/"),
            ]
        )
        self.sign_in("/codex/")
        problems += self.check_every_page(
            [
                ("home", "/"),
                ("my-codex", "/codex/"),
                ("my-codex-search", f"/codex/?tag={LONG_TAG}"),
                ("my-codex-by-application", f"/codex/?app={self.application.pk}"),
                ("entry", entry),
                ("entry-compare", entry + "?from=1&to=3"),
                ("delete", entry + "delete/"),
                ("import", "/codex/import/"),
                ("clear", "/codex/clear/"),
                ("connected-applications", "/account/clients/"),
                ("consent", consent),
                ("consent-refused", "/o/authorize/?client_id=no-such-client&response_type=code"),
                ("not-found", f"/codex/entries/{'1' * 8}-1111-4111-8111-{'1' * 12}/"),
            ]
        )
        # Revoking lands on the same page with its notice; signing out on the home page with its own.
        self.visit("/account/clients/")
        self.to_next_page(
            self.web.find_elements(By.CSS_SELECTOR, "td.action button")[0].click, By.CSS_SELECTOR, ".notice"
        )
        problems += self.check_every_page([("revoked", self.web.current_url.removeprefix(self.live.base_url))])
        # The home page with its notice (the page it leaves has a status too: its revoked notice).
        self.to_next_page(
            self.web.find_element(By.CSS_SELECTOR, "header form button").click, By.CSS_SELECTOR, "[role=status]"
        )
        for viewport in VIEWPORTS:  # the message shows once: this page, not a reload of it
            self.use_viewport(viewport)
            problems += self.problems_of_page("signed-out", viewport)
        self.assertEqual(problems, [], "\n".join(problems))

    @override_settings(ACCOUNT_REAUTHENTICATION_TIMEOUT=3600)
    def test_the_account_pages_fit_both_screens_and_have_no_accessibility_violation(self) -> None:
        provider = {
            "id": "acme",
            "name": "Acme Corporation's identity provider",
            "issuer": f"http://127.0.0.1:{free_port()}",  # nothing listens: the page that says so
            "client_id": "codex",
            "secret": "s",
            "domains": ["acme.test"],
        }
        override = override_settings(**sso_settings(provider))
        override.enable()
        self.addCleanup(override.disable)
        problems = self.check_every_page(
            [
                ("sign-in-with-providers", "/accounts/login/?next=/codex/"),
                ("provider-callback-without-state", "/accounts/oidc/acme/login/callback/?code=x"),
                ("provider-callback-error", "/accounts/oidc/acme/login/callback/?error=access_denied&state=x"),
            ]
        )
        self.visit("/accounts/login/")
        self.to_next_page(
            self.web.find_element(By.XPATH, "//button[starts-with(normalize-space(), 'Sign in with Acme')]").click,
            By.XPATH,
            "//h1[contains(., 'could not be used')]",
        )
        for viewport in VIEWPORTS:
            self.use_viewport(viewport)
            problems += self.problems_of_page("provider-unavailable", viewport)
        self.sign_in("/account/")
        problems += self.check_every_page(
            [
                ("account", "/account/"),
                ("signed-in-sign-in", "/accounts/login/"),
                ("sign-out", "/accounts/logout/"),
                ("reauthenticate", "/accounts/reauthenticate/?next=/account/delete/"),
            ]
        )
        self.visit("/accounts/reauthenticate/?next=/account/")
        self.web.find_element(By.ID, "id_password").send_keys("alice-password")
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, "main form button[type=submit]").click)
        problems += self.check_every_page(
            [
                ("password-change", "/accounts/password/change/"),
                ("second-factor", "/accounts/2fa/"),
                ("totp-setup", "/accounts/2fa/totp/activate/"),
                ("passkey-add", "/accounts/2fa/webauthn/add/"),
                ("delete-account", "/account/delete/"),
            ]
        )
        self.assertEqual(problems, [], "\n".join(problems))

    def test_the_admin_pages_fit_a_phone(self) -> None:
        # The admin is Django's own (its markup is not ours to make pass axe-core); what this
        # project adds to it must not make it wider than the screen.
        self.sign_in("/codex/", username="operator")
        problems = self.check_every_page(
            [
                ("admin", "/admin/"),
                ("admin-entries", "/admin/notebook/entry/"),
                ("admin-entry", f"/admin/notebook/entry/{self.entry.pk}/change/"),
                ("admin-codexes", "/admin/notebook/codex/"),
                ("admin-users", "/admin/auth/user/"),
            ],
            axe=False,
        )
        self.assertEqual(problems, [], "\n".join(problems))
