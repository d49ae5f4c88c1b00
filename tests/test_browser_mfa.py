"""A second factor in headless Chromium: an authenticator app (TOTP, the code computed from
the secret the setup page shows, RFC 6238), recovery codes, and a passkey through Chromium's
virtual authenticator (served on localhost, which WebAuthn accepts over HTTP). Each is turned
on from the account page after signing in again, asked for at the next sign-in, and turned
off again. allauth's TOTP clock is a test clock: a code is valid in its 30-second step only."""

import re

from allauth.mfa import app_settings as mfa_settings
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal import auth as totp_auth
from django.test import override_settings
from selenium.webdriver.common.by import By
from selenium.webdriver.common.virtual_authenticator import Protocol, Transport, VirtualAuthenticatorOptions

from tests.browser import BrowserPages, PageChecks, headless_chromium
from tests.clocks import SignInClock
from tests.live import LiveServerTestCase
from tests.totp import totp


@override_settings(ACCOUNT_REAUTHENTICATION_TIMEOUT=3600, MFA_WEBAUTHN_ALLOW_INSECURE_ORIGIN=True)
class SecondFactorTest(BrowserPages, PageChecks, LiveServerTestCase):
    screenshot_prefix = "mfa"

    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        self.alice = self.make_user("alice")
        self.clock = SignInClock()
        patcher = self.clock.patch(totp_auth)
        patcher.start()
        self.addCleanup(patcher.stop)
        self.base = self.live.base_url

    def go(self, path: str) -> None:
        self.web.get(self.base + path)
        self.wait_for_page_showing(By.TAG_NAME, "h1")

    def click(self, text: str) -> None:
        """A link or button that leads to another page (or the same one again, with an alert)."""
        self.to_next_page(
            self.web.find_element(By.XPATH, f"//*[self::a or self::button][normalize-space()='{text}']").click
        )

    def submit(self, selector: str = "main form button[type=submit]") -> None:
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, selector).click)

    def password_sign_in(self) -> None:
        self.go("/accounts/login/")
        self.web.find_element(By.ID, "id_login").send_keys("alice")
        self.web.find_element(By.ID, "id_password").send_keys("alice-password")
        self.submit("main form button.primary")

    def reauthenticate_if_asked(self) -> None:
        if "/accounts/reauthenticate/" in self.web.current_url:
            self.shot("reauthenticate")
            self.web.find_element(By.ID, "id_password").send_keys("alice-password")
            self.submit()

    def sign_out(self) -> None:
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, "header form button").click, By.LINK_TEXT, "Sign in")

    def main_text(self) -> str:
        return self.web.find_element(By.TAG_NAME, "main").text

    def test_an_authenticator_app_and_recovery_codes_from_setup_to_sign_in_and_off(self) -> None:
        self.password_sign_in()
        self.go("/account/")
        self.shot("account")
        self.click("Set up an authenticator app")
        self.reauthenticate_if_asked()
        self.assertIn("/accounts/2fa/totp/activate/", self.web.current_url)
        secret = self.web.find_element(By.ID, "authenticator_secret").text
        self.shot("totp-setup")
        self.web.find_element(By.ID, "id_code").send_keys(totp(secret, self.clock.now))
        self.submit()
        self.assertTrue(Authenticator.objects.filter(user=self.alice, type="totp").exists(), self.main_text())
        self.go("/accounts/2fa/recovery-codes/")
        codes = re.findall(rf"\b\d{{{mfa_settings.RECOVERY_CODE_DIGITS}}}\b", self.main_text())
        self.assertEqual(len(codes), mfa_settings.RECOVERY_CODE_COUNT, self.main_text())
        self.shot("recovery-codes")
        self.signed_in_as = "alice"
        self.check_open_page("recovery-codes")
        for name, path in [
            ("recovery-codes-new", "/accounts/2fa/recovery-codes/generate/"),
            ("totp-turn-off", "/accounts/2fa/totp/deactivate/"),
            ("reauthenticate-with-a-code", "/accounts/2fa/reauthenticate/?next=/account/"),
        ]:
            self.go(path)
            self.check_open_page(name)
        self.signed_in_as = None  # from here, signing in again

        # The next sign-in asks for a code; a wrong one is refused, this step's is accepted.
        self.sign_out()
        self.clock.advance(30)
        self.password_sign_in()
        self.assertIn("/accounts/2fa/authenticate/", self.web.current_url)
        self.shot("totp-asked")
        self.check_open_page("second-factor-asked")
        self.web.find_element(By.ID, "id_code").send_keys(
            "000000" if totp(secret, self.clock.now) != "000000" else "111111"
        )
        self.submit("main form button.primary")
        self.assertIn("/accounts/2fa/authenticate/", self.web.current_url)
        self.assertTrue(self.web.find_elements(By.CSS_SELECTOR, "[role=alert], .errorlist"), self.main_text())
        self.web.find_element(By.ID, "id_code").clear()
        self.web.find_element(By.ID, "id_code").send_keys(totp(secret, self.clock.now))
        self.submit("main form button.primary")
        self.assertTrue(self.web.current_url.endswith("/codex/"), self.main_text())

        # A recovery code signs in once.
        self.sign_out()
        self.password_sign_in()
        self.web.find_element(By.ID, "id_code").send_keys(codes[0])
        self.submit("main form button.primary")
        self.assertTrue(self.web.current_url.endswith("/codex/"), self.web.current_url)

        # Off again, from the account page, after signing in again.
        self.go("/account/")
        self.click("Turn off the authenticator app")
        self.reauthenticate_if_asked()
        self.assertIn("/accounts/2fa/totp/deactivate/", self.web.current_url)
        self.submit()
        self.assertFalse(Authenticator.objects.filter(user=self.alice, type="totp").exists())

    def test_a_passkey_from_setup_to_sign_in(self) -> None:
        self.base = self.live.base_url.replace("127.0.0.1", "localhost")
        options = VirtualAuthenticatorOptions()
        options.protocol = Protocol.CTAP2
        options.transport = Transport.INTERNAL
        options.has_resident_key = True
        options.has_user_verification = True
        options.is_user_verified = True
        self.web.add_virtual_authenticator(options)
        self.password_sign_in()
        self.go("/account/")
        self.click("Add a passkey")
        self.reauthenticate_if_asked()
        self.assertIn("/accounts/2fa/webauthn/add/", self.web.current_url)
        self.assertEqual(self.web.find_element(By.ID, "id_name").get_attribute("value"), "")  # no "Master key"
        self.web.find_element(By.ID, "id_name").send_keys("Laptop")
        self.shot("passkey-add")
        # The page's script has the authenticator make the passkey, then submits the form.
        self.to_next_page(self.web.find_element(By.ID, "mfa_webauthn_add").click)
        self.assertTrue(Authenticator.objects.filter(user=self.alice, type="webauthn").exists(), self.main_text())
        self.assertEqual(len(self.web.get_credentials()), 1)
        self.go("/accounts/2fa/webauthn/")
        self.assertEqual(self.web.find_element(By.CSS_SELECTOR, "ul.cards h2").text, "Laptop")
        self.signed_in_as = "alice"
        self.check_open_page("passkeys")
        passkey = Authenticator.objects.get(user=self.alice, type="webauthn").pk
        for name, path in [
            ("passkey-rename", f"/accounts/2fa/webauthn/keys/{passkey}/edit/"),
            ("passkey-remove", f"/accounts/2fa/webauthn/keys/{passkey}/remove/"),
            ("reauthenticate-with-a-passkey", "/accounts/2fa/webauthn/reauthenticate/?next=/account/"),
        ]:
            self.go(path)
            self.check_open_page(name)
        self.signed_in_as = None

        self.sign_out()
        self.password_sign_in()
        self.assertIn("/accounts/2fa/authenticate/", self.web.current_url)
        self.check_open_page("second-factor-asked-with-a-passkey")
        self.to_next_page(self.web.find_element(By.ID, "mfa_webauthn_authenticate").click)
        self.assertTrue(self.web.current_url.endswith("/codex/"), self.web.current_url)
        self.go("/account/")
        self.assertIn("1 passkey", self.main_text())

    def test_a_person_deletes_their_account_after_signing_in_again(self) -> None:
        from django.contrib.auth import get_user_model

        self.password_sign_in()
        self.go("/account/")
        self.click("Delete my account…")
        self.assertIn("/accounts/reauthenticate/", self.web.current_url)
        self.reauthenticate_if_asked()
        self.assertIn("/account/delete/", self.web.current_url)
        self.web.find_element(By.ID, "id_confirmation").send_keys("not-alice")
        self.submit("main form button.danger")
        self.assertIn("exactly to confirm", self.main_text())
        self.web.find_element(By.ID, "id_confirmation").clear()
        self.web.find_element(By.ID, "id_confirmation").send_keys("alice")
        self.shot("delete-account")
        self.submit("main form button.danger")
        self.assertIn("Your account and everything in it are deleted", self.main_text())
        self.assertFalse(get_user_model().objects.filter(username="alice").exists())
        self.go("/codex/")
        self.assertIn("/accounts/login/", self.web.current_url)
