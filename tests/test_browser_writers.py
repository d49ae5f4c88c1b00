"""Who wrote this, in a real headless Chromium over uvicorn: two applications write over HTTP
with their own tokens; the person reads "written by" on the entry, follows it to everything
that application wrote, sees the counts on the connected-applications page, revokes one and
is offered its notes to review. Screenshots land in var/screenshots/writers-*.png."""

from typing import Any

from oauth2_provider.models import AccessToken
from selenium.webdriver.common.by import By

from notebook.models import Entry
from tests.base import connect_application
from tests.browser import BrowserPages, headless_chromium
from tests.http_client import call_tool
from tests.live import LiveServerTestCase


class BrowserWritersTests(BrowserPages, LiveServerTestCase):
    screenshot_prefix = "writers"

    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        self.alice = self.make_user("alice")
        self.desktop, self.desktop_token = connect_application(self.alice, "Desktop assistant")
        self.coding, self.coding_token = connect_application(self.alice, "Coding agent")

    def call(self, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        response = call_tool(self.mcp_url, token, name, arguments)
        self.assertEqual(response.status_code, 200, response.text)
        result = response.json()["result"]
        self.assertFalse(result.get("isError"), result)
        return result["structuredContent"]["entry"]

    def titles(self) -> list[str]:
        return [h.text for h in self.web.find_elements(By.CSS_SELECTOR, "ol.entries h2")]

    def test_a_person_sees_which_agent_wrote_a_note_and_what_else_it_wrote(self) -> None:
        plan = self.call(
            self.desktop_token, "field_notes_save", {"requestId": "p", "entry": {"title": "Trip plan", "content": "v1"}}
        )
        self.call(
            self.desktop_token,
            "field_notes_save",
            {"requestId": "g", "entry": {"title": "Groceries", "content": "milk"}},
        )
        self.call(
            self.coding_token,
            "field_notes_update",
            {"id": plan["id"], "expectedRevision": 1, "entry": {"title": "Trip plan", "content": "v2, rewritten"}},
        )
        self.call(
            self.coding_token,
            "field_notes_save",
            {"requestId": "b", "entry": {"title": "Build notes", "content": "make"}},
        )

        # The entry says who created it, who last changed it, and who wrote each revision.
        self.sign_in(f"/codex/entries/{plan['id']}/")
        main = self.web.find_element(By.TAG_NAME, "main").text
        self.assertIn("Written by Desktop assistant · last changed by Coding agent", main)
        revisions = [s.text for s in self.web.find_elements(By.CSS_SELECTOR, "section.revision > p.meta")]
        self.assertIn("written by Coding agent (token scopes: notes:read notes:write)", revisions[0])
        self.assertIn("written by Desktop assistant", revisions[1])
        self.shot("entry")

        # Following the writer's name lists everything that application wrote.
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, "p.meta a.writer[href*='app=']").click)
        self.assertIn("Showing notes written by Desktop assistant", self.web.find_element(By.TAG_NAME, "main").text)
        self.assertEqual(self.titles(), ["Trip plan", "Groceries"])  # newest first
        self.shot("filtered-desktop")
        self.web.get(self.live.base_url + f"/codex/?app={self.coding.client_id}")
        self.assertEqual(self.titles(), ["Build notes", "Trip plan"])
        self.shot("filtered-coding")

        # The connected-applications page counts what each wrote and links to it.
        self.web.get(self.live.base_url + "/account/clients/")
        cards = {
            card.find_element(By.TAG_NAME, "h2").text: card
            for card in self.web.find_elements(By.CSS_SELECTOR, "ul.cards > li")
        }
        self.assertIn("2 notes: it created 1 and made the latest change to 2", cards["Coding agent"].text)
        self.assertIn("2 notes: it created 2 and made the latest change to 1", cards["Desktop assistant"].text)
        self.shot("clients")

        # Revoking the coding agent asks first, keeps its notes and offers to review them.
        confirm = self.to_next_page(
            cards["Coding agent"].find_element(By.PARTIAL_LINK_TEXT, "Revoke").click,
            By.CSS_SELECTOR,
            "main button.danger",
        )
        self.assertEqual(self.web.find_element(By.TAG_NAME, "h1").text, "Revoke access for Coding agent?")
        self.assertTrue(AccessToken.objects.filter(application=self.coding).exists())  # asking revoked nothing
        self.shot("revoke")
        notice = self.to_next_page(confirm.click, By.CSS_SELECTOR, ".messages [role=status]").text
        self.assertIn("Revoked Coding agent", notice)
        self.shot("revoked")
        self.to_next_page(self.web.find_element(By.LINK_TEXT, "review the 2 notes it wrote").click)
        self.assertIn("app=", self.web.current_url)
        self.assertEqual(self.titles(), ["Build notes", "Trip plan"])
        self.assertEqual(Entry.objects.count(), 3)
