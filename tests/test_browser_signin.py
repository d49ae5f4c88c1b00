"""The sign-in page in a real headless browser over uvicorn: the browser scaffolding works."""

from selenium.webdriver.common.by import By

from tests.browser import BrowserPages, headless_chromium, screenshot_dir
from tests.live import LiveServerTestCase


class BrowserSignInTests(BrowserPages, LiveServerTestCase):
    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        self.make_user("alice")

    def submit_password(self, password: str, shows: str):
        """Sign in as alice with ``password``; the next page's element ``shows`` (a CSS selector)."""
        self.web.get(self.live.base_url + "/accounts/login/")
        self.wait_for_page_showing(By.CSS_SELECTOR, "button[type=submit].primary")
        self.web.find_element(By.ID, "id_login").send_keys("alice")
        self.web.find_element(By.ID, "id_password").send_keys(password)
        return self.to_next_page(
            self.web.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click, By.CSS_SELECTOR, shows
        )

    def test_a_person_signs_in_and_lands_on_my_codex(self) -> None:
        self.submit_password("alice-password", "header form button")  # Sign out: signed in
        self.assertTrue(self.web.current_url.endswith("/codex/"), self.web.current_url)
        self.assertEqual(
            self.web.find_element(By.CSS_SELECTOR, "header .who").get_attribute("textContent"), "Signed in as alice"
        )
        self.web.save_screenshot(str(screenshot_dir() / "signed-in.png"))

    def test_a_wrong_password_shows_an_error_and_keeps_the_person_signed_out(self) -> None:
        alert = self.submit_password("not-the-password", "[role=alert]")
        self.assertIn("did not match", alert.text)
        self.assertIn("/accounts/login/", self.web.current_url)
