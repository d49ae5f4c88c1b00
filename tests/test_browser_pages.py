"""Every page, as a person sees it in headless Chromium at 1280 px, on a 390 px phone and on a
320 px one: nothing wider than the screen (document.documentElement.scrollWidth > clientWidth
fails), the site's frame (tests.browser.PageChecks: one header on at most two lines that names
who is signed in, every form control and box inside its column and its container, no date
broken over two lines), no axe-core violation, and a whole-page screenshot of each in
var/screenshots/pages-<page>-<width>.png.

The notebook holds what makes pages wide: a long unbroken title, tag, related agent id, URL
and application name; two connected applications and a command-line token; three revisions.
"""

import datetime as dt
import tempfile
from pathlib import Path

from django.contrib.auth import get_user_model
from django.test import override_settings
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions

from authserver.core.tokens import mint_access_token
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
CURSOR = "cursor://anysphere.cursor-mcp/oauth/callback"


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
        # Desktop clients answered at their own scheme: one the consent page names, one it cannot.
        self.desktop_clients = {
            redirect_uri: register_client(self.live.base_url, redirect_uri).json()["client_id"]
            for redirect_uri in (CURSOR, "com.example.desktop-notes-application-with-a-long-name:/oauth2redirect")
        }
        self.application = application

    def visit(self, path: str) -> None:
        self.web.get(self.live.base_url + path)
        self.wait().until(expected_conditions.presence_of_element_located((By.TAG_NAME, "h1")))

    def check_every_page(self, pages: list[tuple[str, str]], *, axe: bool = True, site: bool = True) -> list[str]:
        problems = []
        for viewport in VIEWPORTS:
            self.use_viewport(viewport)
            for name, path in pages:
                self.visit(path)
                problems += self.problems_of_page(name, viewport, axe=axe, site=site)
        return problems

    def check_this_page(self, name: str) -> list[str]:
        """The page a form just answered with (no visit: it would be another page)."""
        problems = []
        for viewport in VIEWPORTS:
            self.use_viewport(viewport)
            problems += self.problems_of_page(name, viewport)
        return problems

    def submit(self, selector: str, until: str) -> None:
        """Press the button at ``selector`` and wait for the answer: a new document showing ``until``."""
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, selector).click, By.CSS_SELECTOR, until)

    def test_every_page_fits_both_screens_and_has_no_accessibility_violation(self) -> None:
        entry = f"/codex/entries/{self.entry.id}/"
        _, challenge = pkce_pair()
        consent = authorization_url(
            self.live.base_url, self.client_id, code_challenge=challenge, code_challenge_method="S256"
        ).removeprefix(self.live.base_url)
        desktop_consents = [
            authorization_url(
                self.live.base_url,
                client_id,
                redirect_uri=redirect_uri,
                code_challenge=challenge,
                code_challenge_method="S256",
            ).removeprefix(self.live.base_url)
            for redirect_uri, client_id in self.desktop_clients.items()
        ]
        self.signed_in_as = None
        problems = self.check_every_page(
            [
                ("home-signed-out", "/"),
                ("sign-in", "/accounts/login/"),
                ("sign-in-for-a-page", "/accounts/login/?next=/codex/"),
                ("not-found-signed-out", "/no-such-page/"),
                ("account-inactive", "/accounts/inactive/"),
            ]
        )
        self.visit("/accounts/login/")
        self.web.find_element(By.ID, "id_login").send_keys("alice")
        self.web.find_element(By.ID, "id_password").send_keys("not-the-password")
        self.submit("main form button.primary", "main .error[role=alert]")
        problems += self.check_this_page("sign-in-refused")
        self.sign_in("/codex/")
        self.signed_in_as = "alice"
        problems += self.check_every_page(
            [
                ("home", "/"),
                ("my-notebook", "/codex/"),
                ("my-notebook-search", f"/codex/?tag={LONG_TAG}"),
                ("my-notebook-by-application", f"/codex/?app={self.application.pk}"),
                ("entry", entry),
                ("entry-compare", entry + "?from=1&to=3"),
                ("delete", entry + "delete/"),
                ("import", "/codex/import/"),
                ("clear", "/codex/delete-all/"),
                ("connected-applications", "/account/clients/"),
                ("revoke", f"/account/clients/{self.application.pk}/revoke/"),
                ("consent", consent),
                ("consent-desktop", desktop_consents[0]),
                ("consent-unknown-application", desktop_consents[1]),
                ("consent-refused", "/o/authorize/?client_id=no-such-client&response_type=code"),
                ("not-found", f"/codex/entries/{'1' * 8}-1111-4111-8111-{'1' * 12}/"),
            ]
        )
        # Forms answered with an error: the warning box and the field under it fit.
        self.visit("/codex/delete-all/")
        self.web.find_element(By.ID, "id_confirmation").send_keys("delete everything now")
        self.submit("main form button.danger", "#confirmation-error")
        problems += self.check_this_page("clear-refused")
        refused = Path(tempfile.mkdtemp()) / "refused.json"
        refused.write_text('{"format": "agent-codex-export", "version": 2, "entries": [{"id": "' + LONG_WORD + '"}]}')
        self.visit("/codex/import/")
        self.web.find_element(By.ID, "id_file").send_keys(str(refused))
        self.submit("main form button.primary", "main table")
        problems += self.check_this_page("import-refused")
        # Revoking asks first, then lands on the applications with its notice; signing out lands
        # on the home page with its own.
        self.visit("/account/clients/")
        self.to_next_page(
            self.web.find_elements(By.CSS_SELECTOR, "ul.cards a.button")[0].click, By.CSS_SELECTOR, "main button.danger"
        )
        self.submit("main button.danger", ".messages [role=status]")
        problems += self.check_every_page([("revoked", self.web.current_url.removeprefix(self.live.base_url))])
        # The home page with its notice (the page it leaves has a status too: its revoked notice).
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, "header form button").click, By.LINK_TEXT, "Sign in")
        self.signed_in_as = None
        problems += self.check_this_page("signed-out")  # the message shows once: this page, not a reload
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
        self.signed_in_as = None
        problems = self.check_every_page(
            [
                ("sign-in-with-providers", "/accounts/login/?next=/codex/"),
                ("provider-sign-in-asks", "/accounts/oidc/acme/login/"),
                ("provider-sign-in-cancelled", "/accounts/3rdparty/login/cancelled/"),
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
        problems += self.check_this_page("provider-unavailable")
        self.sign_in("/account/")
        self.signed_in_as = "alice"
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
                ("passkeys", "/accounts/2fa/webauthn/"),
                ("delete-account", "/account/delete/"),
                ("new-agent", "/account/clients/agents/new/"),
            ]
        )
        # A headless agent made with a secret: the page that shows it once fits too.
        self.visit("/account/clients/agents/new/")
        self.web.find_element(By.ID, "id_name").send_keys(LONG_WORD)
        self.web.find_element(By.ID, "id_authentication_secret").click()
        self.submit("main form button.primary", "#agent_secret")
        problems += self.check_this_page("new-agent-made")
        # A wrong current password: the error under its field fits.
        self.visit("/accounts/password/change/")
        for field, value in [("id_oldpassword", "wrong"), ("id_password1", LONG_WORD), ("id_password2", LONG_WORD)]:
            self.web.find_element(By.ID, field).send_keys(value)
        self.submit("main form button.primary", "#id_oldpassword-error")
        problems += self.check_this_page("password-change-refused")
        self.assertEqual(problems, [], "\n".join(problems))

    def test_staff_reach_the_admin_from_the_header_and_the_admin_pages_fit_a_phone(self) -> None:
        self.sign_in("/codex/", username="operator")
        self.signed_in_as = "operator"
        problems = self.check_every_page([("home-staff", "/")])
        self.to_next_page(self.web.find_element(By.LINK_TEXT, "Admin").click, By.ID, "site-name")
        self.assertEqual(self.web.find_element(By.ID, "site-name").text, "Agent Codex administration")
        self.assertIn("Agent Codex admin", self.web.title)
        # The admin is Django's own (its markup is not ours to make pass axe-core, nor its
        # frame ours); what this project adds to it must not make it wider than the screen.
        problems += self.check_every_page(
            [
                ("admin", "/admin/"),
                ("admin-entries", "/admin/notebook/entry/"),
                ("admin-entry", f"/admin/notebook/entry/{self.entry.pk}/change/"),
                ("admin-codexes", "/admin/notebook/codex/"),
                ("admin-users", "/admin/auth/user/"),
            ],
            axe=False,
            site=False,
        )
        self.assertEqual(problems, [], "\n".join(problems))
