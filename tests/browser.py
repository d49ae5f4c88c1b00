"""A real headless browser for end-to-end page tests: Debian's Chromium driven by Selenium.

Selenium talks to the system ``chromedriver`` (Debian's ``chromium-driver``, the same build
as ``chromium``); nothing is downloaded at run time. Without a browser on the machine the
browser tests skip, unless ``CODEX_REQUIRE_BROWSER=1`` (CI sets it), which makes a missing
browser a failure instead.

Screenshots go to ``var/screenshots/`` (ignored by git) so a person can look at each page.
"""

import os
import shutil
from pathlib import Path
from typing import Any
from unittest import SkipTest

from django.conf import settings

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER_CANDIDATES = ("chromedriver",)


def _which(names: tuple[str, ...]) -> str | None:
    for name in names:
        found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
        if found:
            return found
    return None


def screenshot_dir() -> Path:
    path = Path(settings.BASE_DIR) / "var" / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


def headless_chromium():
    """A Selenium WebDriver for headless Chromium; the caller quits it (use ``addCleanup``)."""
    browser, driver = _which(CHROMIUM_CANDIDATES), _which(CHROMEDRIVER_CANDIDATES)
    if browser is None or driver is None:
        message = "headless browser tests need chromium and chromedriver (apt-get install chromium chromium-driver)"
        if os.environ.get("CODEX_REQUIRE_BROWSER") == "1":
            raise RuntimeError(message)
        raise SkipTest(message)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in (
        "--headless=new",
        "--no-sandbox",  # CI runs as root, where Chromium's sandbox cannot start
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1100,900",
        "--no-first-run",
        "--disable-extensions",
    ):
        options.add_argument(argument)
    web = webdriver.Chrome(service=Service(executable_path=driver), options=options)
    web.set_page_load_timeout(30)
    web.implicitly_wait(0)
    return web


class BrowserPages:
    """What page tests do in the browser ``self.web`` against ``self.live``: wait, sign in as a
    test person (password ``<name>-password``), and take whole-page screenshots named
    ``<screenshot_prefix>-<name>.png``."""

    web: Any
    live: Any
    screenshot_prefix: str

    def shot(self, name: str) -> None:
        """The whole page: the window grows to the document's height for the picture."""
        height = self.web.execute_script("return document.documentElement.scrollHeight")
        self.web.set_window_size(1100, min(height + 140, 4000))
        self.web.save_screenshot(str(screenshot_dir() / f"{self.screenshot_prefix}-{name}.png"))
        self.web.set_window_size(1100, 900)

    def wait(self):
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.web, 15)

    def sign_in(self, next_path: str = "/codex/", username: str = "alice") -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions

        self.web.get(self.live.base_url + next_path)
        self.wait().until(expected_conditions.url_contains("/accounts/login/"))
        self.web.find_element(By.ID, "id_username").send_keys(username)
        self.web.find_element(By.ID, "id_password").send_keys(f"{username}-password")
        login_page = self.web.find_element(By.TAG_NAME, "html")
        self.web.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click()
        # The sign-in page has an h1 too: first wait for it to go, or a test may read it.
        self.wait().until(expected_conditions.staleness_of(login_page))
        self.wait().until(expected_conditions.presence_of_element_located((By.TAG_NAME, "h1")))
