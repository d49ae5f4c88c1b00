"""The sign-in throttle, as an attacker meets it over real HTTP: 60 wrong passwords for one
account from one address, then the right one; another account from another loopback address
(127.0.0.2) meanwhile; the wait ends and the right password works again. The limits' clock
is a test clock (tests.clocks.SignInClock), so nothing here depends on timing.

It prints what the attacker got: how many of the 60 guesses the server checked at all.
"""

import re
import sys

import httpx2
from django.contrib.auth import get_user_model
from django.core.cache import cache

from authserver.people.devices import COOKIE
from tests.clocks import SignInClock
from tests.live import LiveServerTestCase
from tests.oauth_helpers import forms_of

GUESSES = 60


class Browser:
    """A person or an attacker at one loopback address, with cookies, over real HTTP."""

    def __init__(self, base_url: str, address: str) -> None:
        self.base_url = base_url
        self.http = httpx2.Client(
            base_url=base_url,
            transport=httpx2.HTTPTransport(local_address=address),
            follow_redirects=False,
            timeout=20,
        )

    def sign_in(self, username: str, password: str, path: str = "/accounts/login/") -> httpx2.Response:
        page = self.http.get(path)
        fields = forms_of(page.text)[-1]["fields"]
        return self.http.post(path, data={**fields, "login": username, "password": password})

    def close(self) -> None:
        self.http.close()


def alert_of(response: httpx2.Response) -> str:
    found = re.search(r'role="alert">(.*?)</', response.text, re.S)
    return re.sub(r"<[^>]+>", "", found.group(1)).strip() if found else ""


class SignInThrottleTest(LiveServerTestCase):
    def setUp(self) -> None:
        cache.clear()
        self.clock = SignInClock()
        patcher = self.clock.patch()
        patcher.start()
        self.addCleanup(patcher.stop)
        User = get_user_model()
        User.objects.create_user("victim", password="victim-password")
        User.objects.create_user("bystander", password="bystander-password")
        self.attacker = Browser(self.live.base_url, "127.0.0.1")
        self.person = Browser(self.live.base_url, "127.0.0.2")
        self.addCleanup(self.attacker.close)
        self.addCleanup(self.person.close)

    def test_sixty_wrong_passwords_engage_the_limit_and_the_right_one_waits_until_it_ends(self) -> None:
        checked = refused = 0
        first_refusal = None
        for guess in range(GUESSES):
            answer = self.attacker.sign_in("victim", f"guess-{guess}")
            self.assertIn(answer.status_code, (200, 429), answer.text[:300])
            if "did not match" in alert_of(answer):
                checked += 1
            else:
                refused += 1
                first_refusal = first_refusal or alert_of(answer)
        print(
            f"\nsign-in throttle: {GUESSES} wrong passwords for one account from one address: "
            f"{checked} checked, {refused} refused without looking at the password",
            file=sys.stderr,
        )
        self.assertLessEqual(checked, 5)
        self.assertEqual(checked + refused, GUESSES)
        self.assertRegex(first_refusal, r"try again in \d+ (seconds|minutes?)")

        # The right password is refused too, from the attacker's address and from another one.
        for browser in (self.attacker, self.person):
            answer = browser.sign_in("victim", "victim-password")
            self.assertNotEqual(answer.status_code, 302, "signed in through the throttle")
        # Another account from another address is unaffected.
        answer = self.person.sign_in("bystander", "bystander-password")
        self.assertEqual(answer.status_code, 302, alert_of(answer))

        # Four minutes on the account's five-minute window is still full; past it, the right
        # password works (from the other address: the attacker's stays counted for a minute).
        self.clock.advance(240)
        self.assertNotEqual(
            Browser(self.live.base_url, "127.0.0.3").sign_in("victim", "victim-password").status_code, 302
        )
        self.clock.advance(61)
        answer = Browser(self.live.base_url, "127.0.0.3").sign_in("victim", "victim-password")
        self.assertEqual(answer.status_code, 302, alert_of(answer))

    def test_a_browser_that_signed_in_before_is_not_locked_out_by_the_guesses(self) -> None:
        # The person signed in from her own browser yesterday, and signed out.
        self.assertEqual(self.person.sign_in("victim", "victim-password").status_code, 302)
        self.assertIn(COOKIE, self.person.http.cookies)
        self.person.http.post(
            "/accounts/logout/", data=forms_of(self.person.http.get("/accounts/logout/").text)[-1]["fields"]
        )
        for guess in range(GUESSES):
            self.attacker.sign_in("victim", f"guess-{guess}")
        self.assertIn("try again in", alert_of(self.attacker.sign_in("victim", "victim-password")))
        stranger = Browser(self.live.base_url, "127.0.0.3")
        self.addCleanup(stranger.close)
        self.assertIn("try again in", alert_of(stranger.sign_in("victim", "victim-password")))
        # Her browser is a known device of the account: counted apart, it signs in at once.
        answer = self.person.sign_in("victim", "victim-password")
        self.assertEqual(answer.status_code, 302, alert_of(answer))

    def test_a_known_device_is_throttled_on_its_own_and_only_for_its_account(self) -> None:
        self.assertEqual(self.person.sign_in("bystander", "bystander-password").status_code, 302)
        self.person.http.post(
            "/accounts/logout/", data=forms_of(self.person.http.get("/accounts/logout/").text)[-1]["fields"]
        )
        # The bystander's device cookie is no key to the victim's account.
        for guess in range(5):
            self.attacker.sign_in("victim", f"guess-{guess}")
        self.assertIn("try again in", alert_of(self.person.sign_in("victim", "victim-password")))
        # And its own failures lock it after the same few.
        for guess in range(5):
            self.person.sign_in("bystander", f"guess-{guess}")
        self.assertIn("try again in", alert_of(self.person.sign_in("bystander", "bystander-password")))
        # A forged cookie counts as no device at all.
        self.person.http.cookies.set(COOKIE, "forged", domain="127.0.0.1")
        self.assertIn("try again in", alert_of(self.person.sign_in("victim", "victim-password")))

    def test_the_refusal_is_counted_and_logged_once_without_the_password(self) -> None:
        from tests.hostile import emitted_logs

        for guess in range(5):
            self.attacker.sign_in("victim", f"guess-{guess}")
        with emitted_logs() as logs:
            answer = self.attacker.sign_in("victim", "the-secret-guess")
        self.assertIn("try again in", alert_of(answer))
        warnings = [message for level, _, message in logs.records if "sign-in refused" in message]
        self.assertEqual(len(warnings), 1, logs.records)
        self.assertIn("victim", warnings[0])
        self.assertNotIn("the-secret-guess", logs.getvalue())
        metrics = self.attacker.http.get("/metrics").text
        self.assertRegex(metrics, r'codex_limit_refusals_total\{kind="sign_in_failures"\} [1-9]')

    def test_the_admin_sign_in_is_the_same_throttled_page(self) -> None:
        get_user_model().objects.create_superuser("operator", password="operator-password")
        answer = self.attacker.http.get("/admin/login/?next=/admin/")
        self.assertEqual(answer.status_code, 302)
        self.assertTrue(answer.headers["location"].startswith("/accounts/login/"), answer.headers["location"])
        for guess in range(5):
            self.attacker.sign_in("operator", f"guess-{guess}")
        answer = self.attacker.sign_in("operator", "operator-password")
        self.assertIn("try again in", alert_of(answer))

    def test_a_host_header_port_does_not_make_a_fresh_count(self) -> None:
        for port in range(1, 8):
            page = self.attacker.http.get("/accounts/login/", headers={"Host": f"127.0.0.1:{port}"})
            fields = forms_of(page.text)[-1]["fields"]
            self.attacker.http.post(
                "/accounts/login/",
                data={**fields, "login": "victim", "password": "wrong"},
                headers={"Host": f"127.0.0.1:{port}"},
            )
        answer = self.person.sign_in("victim", "victim-password")
        self.assertIn("try again in", alert_of(answer))
