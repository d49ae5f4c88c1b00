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
