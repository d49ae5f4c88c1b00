"""A browser-based MCP client on another origin connects and calls every tool: CORS end to end.

The page (tests/pages/browser_client.html) is served from a second loopback origin listed in
CODEX_ALLOWED_ORIGINS. Its JavaScript runs the MCP authorization flow with fetch and WebCrypto:
401 from /mcp, resource metadata, authorization-server metadata, dynamic registration, PKCE;
Selenium plays the person on the sign-in and consent pages; back on the page, the code is
exchanged for a token and all four tools are called in the 2026-07-28 shape.
"""

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from django.test import override_settings
from selenium.common.exceptions import WebDriverException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from notebook.models import Entry
from tests.browser import headless_chromium, screenshot_dir
from tests.live import LiveServerTestCase
from tests.loopback_http import LoopbackHTTPServer

PAGE = (Path(__file__).parent / "pages" / "browser_client.html").read_bytes()


class _PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path.split("?")[0] != "/client.html":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class PageServer(LoopbackHTTPServer):
    """A tiny static server for the client page, on its own loopback port (its own origin)."""

    def __init__(self) -> None:
        super().__init__(_PageHandler)
        self.origin = f"http://127.0.0.1:{self.port}"


class BrowserMcpClientTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.page = self.enterContext(PageServer())
        self.enterContext(override_settings(CODEX_ALLOWED_ORIGINS=[self.live.base_url, self.page.origin]))
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)

    def status(self) -> str:
        # One script call reads the text: an element found first and read next can belong to a
        # page the browser has already left (the page sends it to sign in by itself).
        return self.web.execute_script("return document.getElementById('status')?.textContent ?? ''")

    def finished(self) -> bool:
        return self.status() == "done" or self.status().startswith("failed")

    def wait_for(self, condition, timeout: int = 30) -> Any:
        # While the page navigates, a read of the page it leaves may fail: that is "not yet".
        return WebDriverWait(self.web, timeout, ignored_exceptions=(WebDriverException,)).until(condition)

    def test_a_page_on_an_allowed_origin_authorizes_and_calls_all_four_tools(self) -> None:
        self.web.get(f"{self.page.origin}/client.html#mcp={self.mcp_url}")
        # Discovery and registration ran in the page; it has sent the browser to sign in.
        # The sign-in form, whole (its submit button is its last field), or the page's own failure.
        self.wait_for(lambda web: web.find_elements(By.CSS_SELECTOR, "button[type=submit].primary") or self.finished())
        self.assertIn("/accounts/login/", self.web.current_url, self.web.find_element(By.TAG_NAME, "body").text)
        self.web.find_element(By.ID, "id_login").send_keys("alice")
        self.web.find_element(By.ID, "id_password").send_keys("alice-password")
        self.web.find_element(By.CSS_SELECTOR, "button[type=submit].primary").click()
        allow = self.wait_for(expected_conditions.element_to_be_clickable((By.CSS_SELECTOR, "button[name=allow]")))
        self.assertIn("Browser test client", self.web.find_element(By.TAG_NAME, "h1").text)
        allow.click()
        # Back on the page's origin: token, then the four tools.
        self.wait_for(lambda web: self.finished())  # the status only the page on its origin shows
        self.web.save_screenshot(str(screenshot_dir() / "browser-mcp-client.png"))
        log = self.web.find_element(By.ID, "log")
        self.assertEqual(self.status(), "done", log.text)
        result = json.loads(log.get_attribute("data-result"))
        self.assertEqual(result["found"], 1)
        self.assertEqual(result["revision"], 2)
        entry = Entry.objects.get(pk=result["entryId"])
        self.assertEqual(entry.codex.owner, self.alice)
        self.assertEqual(entry.content, "Updated from a browser tab")
        self.assertIn(f'resource_metadata="{self.live.base_url}/.well-known/', result["challenge"])

    def test_a_page_on_an_origin_not_allowed_cannot_even_discover(self) -> None:
        with override_settings(CODEX_ALLOWED_ORIGINS=[self.live.base_url]):
            self.web.get(f"{self.page.origin}/client.html#mcp={self.mcp_url}")
            self.wait_for(lambda web: self.finished())
        self.assertIn("Failed to fetch", self.status())
        self.assertEqual(Entry.objects.count(), 0)
