"""The Django admin in a real headless browser over uvicorn: its stylesheets load, so it is
styled wherever the application runs (contract 10), with no proxy in front."""

import urllib.request

from django.contrib.auth import get_user_model
from selenium.webdriver.common.by import By

from tests.browser import BrowserPages, headless_chromium
from tests.live import LiveServerTestCase


class BrowserAdminStylesTests(BrowserPages, LiveServerTestCase):
    screenshot_prefix = "admin"

    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        get_user_model().objects.create_superuser("operator", password="operator-password")

    def assert_styled(self) -> None:
        # Only the admin's base.css defines these (Django's admin palette and header).
        primary = self.web.execute_script(
            "return getComputedStyle(document.documentElement).getPropertyValue('--primary').trim()"
        )
        self.assertEqual(primary, "#79aec8")
        header = self.web.find_element(By.ID, "header")
        self.assertEqual(header.value_of_css_property("display"), "flex")
        sheets = [
            link.get_attribute("href") for link in self.web.find_elements(By.CSS_SELECTOR, "link[rel=stylesheet]")
        ]
        self.assertTrue(any("/static/admin/css/base" in href for href in sheets), sheets)
        for href in sheets:
            with self.subTest(href=href), urllib.request.urlopen(href, timeout=10) as answer:
                self.assertEqual(answer.status, 200)
                self.assertTrue(answer.headers["Content-Type"].startswith("text/css"))

    def test_the_admin_signs_in_on_the_sites_page_and_its_index_is_styled_by_its_own_stylesheets(self) -> None:
        # The admin's sign-in is the site's (its throttle and second factor), then back to the admin.
        self.web.get(self.live.base_url + "/admin/login/")
        self.wait_for_page_showing(By.CSS_SELECTOR, "form button[type=submit].primary")  # the site's sign-in
        self.assertIn("/accounts/login/?next=", self.web.current_url)
        self.web.find_element(By.ID, "id_login").send_keys("operator")
        self.web.find_element(By.ID, "id_password").send_keys("operator-password")
        self.to_next_page(
            self.web.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click, By.ID, "user-tools"
        )
        self.assert_styled()
        self.shot("index")
