"""Streaming answers under ASGI (uvicorn): a static file and each export are sent block by block
from an asynchronous iterator (codex_site.middleware.AsyncStreamingMiddleware). Django's ASGI
handler would otherwise read a synchronous iterator whole into memory first and warn
"StreamingHttpResponse must consume synchronous iterators", as the first page view did for
its stylesheet (WhiteNoise's file response)."""

import json
import warnings

import httpx2
from django.test import AsyncClient, Client

from notebook import services
from notebook.validation import parse_entry_input
from tests.live import LiveServerTestCase

PATHS = ["/static/codex/site.css", "/codex/export.json", "/codex/export.md", "/codex/export-markdown.zip"]


class StreamingUnderASGITest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        codex = services.codex_for_user(user=self.alice)
        for number in range(5):
            services.entry_save(
                codex=codex, request_id=f"r{number}", data=parse_entry_input({"content": f"note {number} " * 3000})
            )
        browser = Client()
        browser.force_login(self.alice)
        self.cookies = {"sessionid": browser.cookies["sessionid"].value}

    def test_static_files_and_exports_stream_without_djangos_warning(self) -> None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")  # whatever an earlier test already triggered
            answers = {path: httpx2.get(self.live.base_url + path, cookies=self.cookies) for path in PATHS}
        for path, answer in answers.items():
            self.assertEqual(answer.status_code, 200, path)
        self.assertEqual(len(json.loads(answers["/codex/export.json"].content)["entries"]), 5)
        self.assertIn(b"note 2 note 2", answers["/codex/export.md"].content)
        self.assertEqual([str(w.message) for w in caught if "StreamingHttpResponse" in str(w.message)], [])

    async def test_under_asgi_a_streaming_answer_is_asynchronous_and_complete(self) -> None:
        browser = AsyncClient()
        await browser.aforce_login(self.alice)
        answer = await browser.get("/codex/export.md")
        self.assertTrue(answer.is_async)
        blocks = [block async for block in answer.streaming_content]
        self.assertGreater(len(blocks), 1)  # about 64 KiB each, not the whole file at once
        self.assertEqual(b"".join(blocks).count(b"\n## "), 5)
