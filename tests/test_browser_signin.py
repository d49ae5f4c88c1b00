"""The sign-in page in a real headless browser over uvicorn: the browser scaffolding works."""

from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from tests.browser import headless_chromium, screenshot_dir
from tests.live import LiveServerTestCase


class BrowserSignInTests(LiveServerTestCase):
    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        self.make_user("alice")

    def sign_in(self, password: str) -> None:
        self.web.get(self.live.base_url + "/accounts/login/")
        self.web.find_element(By.ID, "id_login").send_keys("alice")
        self.web.find_element(By.ID, "id_password").send_keys(password)
        self.web.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click()

    def test_a_person_signs_in_and_lands_on_my_codex(self) -> None:
        self.sign_in("alice-password")
        WebDriverWait(self.web, 10).until(expected_conditions.url_contains("/codex/"))
        self.assertEqual(
            self.web.find_element(By.CSS_SELECTOR, "header .who").get_attribute("textContent"), "Signed in as alice"
        )
        self.web.save_screenshot(str(screenshot_dir() / "signed-in.png"))

    def test_a_wrong_password_shows_an_error_and_keeps_the_person_signed_out(self) -> None:
        self.sign_in("not-the-password")
        alert = WebDriverWait(self.web, 10).until(
            expected_conditions.presence_of_element_located((By.CSS_SELECTOR, "[role=alert]"))
        )
        self.assertIn("did not match", alert.text)
        self.assertIn("/accounts/login/", self.web.current_url)
