"""My notebook in a real headless Chromium over uvicorn: sign in, search, read an entry with its
history, export (a real download, streamed through ASGI), delete, and import the export back.
Screenshots of each page land in var/screenshots/mycodex-*.png."""

import json
import tempfile
import time
from pathlib import Path

from selenium.webdriver.common.by import By

from notebook import services
from notebook.models import Entry
from notebook.validation import parse_entry_input
from tests.browser import BrowserPages, headless_chromium
from tests.live import LiveServerTestCase


class BrowserMyCodexTests(BrowserPages, LiveServerTestCase):
    screenshot_prefix = "mycodex"

    def setUp(self) -> None:
        self.web = headless_chromium()
        self.addCleanup(self.web.quit)
        self.downloads = Path(tempfile.mkdtemp())
        self.web.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(self.downloads)})
        self.alice = self.make_user("alice")
        self.codex = services.codex_for_user(user=self.alice)

    def save(self, request_id: str, **entry) -> Entry:
        return services.entry_save(codex=self.codex, request_id=request_id, data=parse_entry_input(entry))

    def test_an_empty_codex_says_how_to_connect_an_agent(self) -> None:
        self.sign_in()
        self.assertIn("no agent has written a note yet", self.web.find_element(By.TAG_NAME, "main").text)
        self.assertIn(self.mcp_url, self.web.find_element(By.TAG_NAME, "main").text)
        self.shot("empty")

    def test_a_person_searches_reads_exports_deletes_and_imports_back(self) -> None:
        plan = self.save(
            "r1",
            title="Launch plan",
            content="Step one: <script>alert('x')</script>\nStep two: check the Straße signs.",
            tags=["launch", "q3"],
            relatedAgentIds=["planner-agent"],
            provenance={"source": "chat", "turn": 12},
        )
        services.entry_update(
            codex=self.codex,
            entry_id=plan.id,
            expected_revision=1,
            data=parse_entry_input(
                {
                    "title": "Launch plan",
                    "content": "Step one: <script>alert('x')</script>\nStep two: done.\nStep three: rollback drill.",
                    "tags": ["launch", "q3"],
                    "relatedAgentIds": ["planner-agent"],
                }
            ),
        )
        self.save("r2", title="Groceries", content="Milk, eggs, STRASSE bread", tags=["home"])
        self.save("r3", content="An untitled thought about fish.")

        # Sign in straight into My notebook: newest first.
        self.sign_in()
        self.assertEqual(self.web.find_element(By.TAG_NAME, "h1").text, "My notebook")
        titles = [h.text for h in self.web.find_elements(By.CSS_SELECTOR, "ol.entries h2")]
        self.assertEqual(titles, ["Untitled note", "Groceries", "Launch plan"])
        self.shot("list")

        # Search: NFKC + casefold, as the tool does.
        box = self.web.find_element(By.ID, "id_q")
        box.send_keys("strasse")
        self.to_next_page(self.web.find_element(By.CSS_SELECTOR, "form[role=search] button[type=submit]").click)
        self.assertIn("q=strasse", self.web.current_url)
        titles = [h.text for h in self.web.find_elements(By.CSS_SELECTOR, "ol.entries h2")]
        self.assertEqual(titles, ["Groceries"])
        self.shot("search")

        # Open an entry: content as text, history with a diff.
        self.web.get(self.live.base_url + "/codex/?tag=launch")
        self.to_next_page(self.web.find_element(By.LINK_TEXT, "Launch plan").click, By.ID, "content")
        self.assertIn(f"/codex/entries/{plan.id}/", self.web.current_url)
        self.assertIn("<script>alert('x')</script>", self.web.find_element(By.ID, "content").text)
        self.assertEqual(len(self.web.find_elements(By.CSS_SELECTOR, "section.revision")), 2)
        added = [e.text for e in self.web.find_elements(By.CSS_SELECTOR, ".diff ins")]
        self.assertIn("Step three: rollback drill", " ".join(added))
        self.shot("entry")

        # Export: a real download streamed over uvicorn.
        self.web.get(self.live.base_url + "/codex/")
        self.web.find_element(By.LINK_TEXT, "Export everything as JSON").click()
        exported = self.wait_for_download("*.json")
        document = json.loads(exported.read_text())
        self.assertEqual(document["format"], "agent-codex-export")
        self.assertEqual(len(document["entries"]), 3)

        # Delete one entry after confirming.
        self.web.get(self.live.base_url + f"/codex/entries/{plan.id}/")
        self.to_next_page(
            self.web.find_element(By.LINK_TEXT, "Delete this note…").click, By.CSS_SELECTOR, "button.danger"
        )
        self.shot("delete-confirm")
        status = self.to_next_page(
            self.web.find_element(By.CSS_SELECTOR, "button.danger").click, By.CSS_SELECTOR, "[role=status]"
        )
        self.assertIn("Deleted “Launch plan”", status.text)
        self.assertFalse(Entry.objects.filter(pk=plan.id).exists())
        self.shot("after-delete")

        # Import the export back: the deleted entry returns, the others are already there.
        self.web.get(self.live.base_url + "/codex/import/")
        self.assertIn("32.0 MB", self.web.find_element(By.TAG_NAME, "main").text)
        self.web.find_element(By.ID, "id_file").send_keys(str(exported))
        status = self.to_next_page(
            self.web.find_element(By.CSS_SELECTOR, "button.primary[type=submit]").click,
            By.CSS_SELECTOR,
            "[role=status]",
        )
        self.assertIn("Imported 1 of 3 notes. 2 were already in your notebook", status.text)
        self.shot("import")
        self.assertEqual(Entry.objects.get(pk=plan.id).revision, 2)

    def wait_for_download(self, pattern: str) -> Path:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            done = [p for p in self.downloads.glob(pattern) if not p.name.endswith(".crdownload")]
            if done:
                return done[0]
            time.sleep(0.1)
        self.fail(f"no download matching {pattern} in {self.downloads}")
