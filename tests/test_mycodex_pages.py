"""The person's own pages (contract 9): their codex only, the tool's search semantics,
escaped content, history, export, import and deletion."""

import datetime as dt
import json
import re

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.template.loader import render_to_string
from django.test import Client, SimpleTestCase, TransactionTestCase, override_settings
from django.urls import reverse

from authserver.core.tokens import mint_access_token
from mcp_endpoint.auth import check_bearer_token
from mycodex import history
from notebook import services, transfer
from notebook.models import Entry
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase
from tests.mcp_client import call_tool_directly, error_of, success_of
from tests.test_transfer import without_writers

LIST = reverse("mycodex:list")
EXPORT = reverse("mycodex:export")
IMPORT = reverse("mycodex:import")
REMOVED = '<span class="visually-hidden">removed: </span>'
ADDED = '<span class="visually-hidden">added: </span>'
CLEAR = reverse("mycodex:clear")


def page_text(response) -> str:
    """A page without its sign-out form's CSRF token, which is masked afresh on every page."""
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", response.content.decode())


def entry_url(entry) -> str:
    return reverse("mycodex:entry", args=[entry.id])


def delete_url(entry) -> str:
    return reverse("mycodex:delete", args=[entry.id])


def listed_ids(client: Client, url: str) -> list[str]:
    """Every entry id the list shows, following its "Next page" links to the end."""
    ids: list[str] = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, response.content
        ids += [entry["id"] for entry in response.context["page"].entries]
        url = response.context.get("next_url")
    return ids


def streamed(response) -> bytes:
    return b"".join(response.streaming_content)


class PageTestCase(NotebookTestCase):
    def setUp(self) -> None:
        self.client.force_login(self.alice)


class AnonymousTest(NotebookTestCase):
    def test_every_page_sends_an_anonymous_visitor_to_sign_in(self) -> None:
        entry = self.save()
        for method, url in [
            ("get", LIST),
            ("get", entry_url(entry)),
            ("get", delete_url(entry)),
            ("post", delete_url(entry)),
            ("get", EXPORT),
            ("get", reverse("mycodex:export_markdown")),
            ("get", IMPORT),
            ("post", IMPORT),
            ("get", CLEAR),
            ("post", CLEAR),
        ]:
            with self.subTest(method=method, url=url):
                response = getattr(self.client, method)(url)
                self.assertEqual(response.status_code, 302)
                self.assertTrue(response["Location"].startswith("/accounts/login/?next="))
        self.assertTrue(Entry.objects.filter(pk=entry.pk).exists())


class IsolationTest(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.mine = self.save(title="mine", content="alice's secret plan", tags=["shared"], relatedAgentIds=["ag"])
        self.bobs = self.save(
            self.bob_codex, title="bob's", content="bob's secret plan", tags=["shared"], relatedAgentIds=["ag"]
        )

    def test_the_list_and_every_search_show_only_her_entries(self) -> None:
        for query in ["", "?q=secret", "?tag=shared", "?agent=ag", "?q=bob", "?order=id", "?order=id&q=plan"]:
            with self.subTest(query=query):
                ids = listed_ids(self.client, LIST + query)
                self.assertNotIn(str(self.bobs.id), ids)
                self.assertEqual(ids, [] if "bob" in query else [str(self.mine.id)])

    def test_bobs_entry_is_not_found_by_id_in_any_url_and_stays(self) -> None:
        for method, url in [
            ("get", entry_url(self.bobs)),
            ("get", delete_url(self.bobs)),
            ("post", delete_url(self.bobs)),
        ]:
            with self.subTest(method=method, url=url):
                response = getattr(self.client, method)(url)
                self.assertEqual(response.status_code, 404)
                self.assertNotIn(b"bob's secret", response.content)
        self.assertTrue(Entry.objects.filter(pk=self.bobs.pk).exists())

    def test_bobs_entry_answers_exactly_like_an_id_that_does_not_exist(self) -> None:
        missing = self.client.get(reverse("mycodex:entry", args=["11111111-1111-4111-8111-111111111111"]))
        other = self.client.get(entry_url(self.bobs))
        self.assertEqual((missing.status_code, page_text(missing)), (other.status_code, page_text(other)))

    def test_the_export_holds_only_her_entries(self) -> None:
        document = json.loads(streamed(self.client.get(EXPORT)))
        self.assertEqual([entry["id"] for entry in document["entries"]], [str(self.mine.id)])
        self.assertNotIn(b"bob's", streamed(self.client.get(reverse("mycodex:export_markdown"))))

    def test_a_crafted_import_form_cannot_reach_bobs_codex(self) -> None:
        document = json.loads("".join(transfer.export_json_chunks(codex=self.bob_codex)))
        document["entries"][0]["content"] = "planted"
        document["entries"][0]["revisions"][0]["content"] = "planted"
        upload = SimpleUploadedFile("x.json", json.dumps(document).encode(), "application/json")
        response = self.client.post(IMPORT, {"file": upload, "owner": "bob", "codex": self.bob_codex.pk})
        self.assertEqual(response.status_code, 200)
        self.bobs.refresh_from_db()
        self.assertEqual(self.bobs.content, "bob's secret plan")
        planted = Entry.objects.get(content="planted")
        self.assertEqual(planted.codex, self.alice_codex)
        self.assertNotEqual(planted.id, self.bobs.id)

    def test_deleting_everything_leaves_bobs_codex_alone(self) -> None:
        response = self.client.post(CLEAR, {"confirmation": "delete all my notes", "codex": self.bob_codex.pk})
        self.assertRedirects(response, LIST)
        self.assertFalse(Entry.objects.filter(codex=self.alice_codex).exists())
        self.assertTrue(Entry.objects.filter(pk=self.bobs.pk).exists())


class ListTest(PageTestCase):
    def test_an_empty_codex_says_how_to_connect_an_agent(self) -> None:
        response = self.client.get(LIST)
        self.assertContains(response, "no agent has written a note yet")
        self.assertContains(response, "/mcp")

    def test_it_lists_newest_first_and_pages_through_everything_once(self) -> None:
        entries = [self.save(content=f"note {i}") for i in range(45)]
        # Rewrite a few so that update order differs from creation order.
        for entry in entries[:3]:
            services.entry_update(
                codex=self.alice_codex,
                entry_id=entry.id,
                expected_revision=1,
                data=parse_entry_input({"content": "fresh " + entry.content}),
            )
        ids = listed_ids(self.client, LIST)
        expected = [
            str(e.id) for e in Entry.objects.filter(codex=self.alice_codex).order_by("-updated_at", "-write_seq")
        ]
        self.assertEqual(ids, expected)
        self.assertEqual(len(ids), 45)

    def test_it_shows_title_excerpt_tags_revision_and_time(self) -> None:
        entry = self.save(title="Launch", content="x" * 300, tags=["q3"])
        response = self.client.get(LIST)
        self.assertContains(response, "Launch")
        self.assertContains(response, "x" * 160 + "…")
        self.assertNotContains(response, "x" * 161)
        self.assertContains(response, ">q3<")
        self.assertContains(response, "revision&nbsp;1")
        self.assertContains(response, entry.updated_at.strftime("%Y-%m-%dT%H:%M:%S"))

    def test_a_tampered_cursor_or_a_too_long_query_is_a_clear_error(self) -> None:
        self.save()
        for query in ["?cursor=forged", "?order=id&cursor=forged", "?q=" + "x" * 257]:
            with self.subTest(query=query):
                response = self.client.get(LIST + query)
                self.assertEqual(response.status_code, 400)
                self.assertContains(response, 'role="alert"', status_code=400)

    def test_a_cursor_for_other_filters_is_refused(self) -> None:
        for i in range(25):
            self.save(content=f"plan {i}")
        next_url = self.client.get(LIST + "?q=plan").context["next_url"]
        response = self.client.get(next_url.replace("q=plan", "q=pla"))
        self.assertEqual(response.status_code, 400)


class EntryPageTest(PageTestCase):
    def test_content_with_html_and_script_is_shown_as_text(self) -> None:
        hostile = '<script>alert("x")</script><img src=x onerror=alert(1)> & <b>bold</b>'
        entry = self.save(
            title="<i>t</i>", content=hostile, tags=["<tag>"], relatedAgentIds=["<a>"], provenance={"k": "<script>"}
        )
        for url in [entry_url(entry), LIST, delete_url(entry)]:
            with self.subTest(url=url):
                body = self.client.get(url).content.decode()
                self.assertNotIn("<script>", body)
                self.assertNotIn("<img src=x", body)  # the note's, not the header's own icon
                self.assertNotIn("<i>t</i>", body)
                self.assertIn("&lt;script&gt;", body)
        body = self.client.get(entry_url(entry)).content.decode()
        self.assertIn("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;", body)

    def test_it_shows_content_metadata_provenance_and_every_revision_with_diffs(self) -> None:
        entry = self.save(
            title="Plan",
            content="step one\nstep two",
            tags=["a"],
            relatedAgentIds=["agent-7"],
            provenance={"source": "chat"},
        )
        for revision, content in [(1, "step one\nstep 2"), (2, "step one\nstep 2\nstep three")]:
            services.entry_update(
                codex=self.alice_codex,
                entry_id=entry.id,
                expected_revision=revision,
                data=parse_entry_input({"title": "Plan", "content": content, "tags": ["a", "b"]}),
            )
        response = self.client.get(entry_url(entry))
        body = response.content.decode()
        self.assertIn("step three", body)
        self.assertIn("agent-7", body)  # in revision 1's snapshot
        self.assertEqual(re.findall(r'<h3 id="rev-(\d+)">', body), ["3", "2", "1"])
        # Field by field, the changed words marked, for a reader rather than in diff notation.
        self.assertIn(f"<del>{REMOVED}two</del><ins>{ADDED}2</ins>", body)
        self.assertIn(f"<ins>{ADDED}b</ins>", body)  # the tag added in revision 2
        self.assertIn(f"<del>{REMOVED}agent-7</del>", body)  # the related agent removed
        self.assertNotIn("@@", body)
        self.assertNotIn("--- revision", body)
        self.assertIn("Revision 3", body)

    def test_it_compares_any_two_revisions(self) -> None:
        entry = self.save(content="one")
        for revision, content in [(1, "two"), (2, "three")]:
            services.entry_update(
                codex=self.alice_codex,
                entry_id=entry.id,
                expected_revision=revision,
                data=parse_entry_input({"content": content}),
            )
        body = self.client.get(entry_url(entry) + "?from=1&to=3").content.decode()
        self.assertIn(f"<del>{REMOVED}one</del><ins>{ADDED}three</ins>", body)
        # Revision 2 to 3 is also what the history shows for revision 3: shown once, not twice.
        consecutive = self.client.get(entry_url(entry) + "?from=2&to=3").content.decode()
        self.assertEqual(consecutive.count(f"<ins>{ADDED}three</ins>"), 1)
        self.assertIn('href="#comparison"', consecutive)
        self.assertIn(
            "This note has no such revision", self.client.get(entry_url(entry) + "?from=1&to=9").content.decode()
        )

    def test_provenance_is_pretty_json(self) -> None:
        entry = self.save(provenance={"source": {"tool": "x"}})
        self.assertContains(self.client.get(entry_url(entry)), "{\n  &quot;source&quot;: {\n    &quot;tool&quot;")


class WordDiffTest(SimpleTestCase):
    def test_only_the_changed_words_are_marked_and_the_text_is_kept_exactly(self) -> None:
        self.assertEqual(
            history.word_changes("the quick brown fox", "the slow brown fox"),
            [("same", "the "), ("del", "quick"), ("ins", "slow"), ("same", " brown fox")],
        )
        old, new = "line one\n  indented <b>\nlast", "line one\n  indented <i>\nlast\nextra"
        changes = history.word_changes(old, new)
        self.assertEqual("".join(text for kind, text in changes if kind != "ins"), old)
        self.assertEqual("".join(text for kind, text in changes if kind != "del"), new)

    def test_long_unchanged_stretches_are_shortened(self) -> None:
        same = "word " * 400
        changes = history.shorten(history.word_changes(same + "old", same + "new"))
        self.assertEqual(changes[0][0], "gap")
        self.assertLess(sum(len(text) for _, text in changes), 600)

    def test_a_changed_field_is_escaped_in_the_page(self) -> None:
        html = render_to_string(
            "mycodex/_diff.html",
            {
                "fields": history.field_changes(
                    history.Snapshot("<b>x</b>", None, [], [], None), history.Snapshot("<i>y</i>", None, [], [], None)
                )
            },
        )
        self.assertIn("&lt;<del>", html)
        self.assertNotIn("<b>", html)
        self.assertNotIn("<i>", html)


class DeletePageTest(PageTestCase):
    def test_get_asks_for_confirmation_and_post_deletes(self) -> None:
        entry = self.save(title="Doomed")
        response = self.client.get(delete_url(entry))
        self.assertContains(response, "Delete this note?")
        self.assertTrue(Entry.objects.filter(pk=entry.pk).exists())
        response = self.client.post(delete_url(entry), follow=True)
        self.assertRedirects(response, LIST)
        self.assertContains(response, "Deleted “Doomed”")
        self.assertFalse(Entry.objects.filter(pk=entry.pk).exists())
        self.assertEqual(self.client.get(entry_url(entry)).status_code, 404)

    def test_posts_need_the_csrf_token(self) -> None:
        entry = self.save()
        client = Client(enforce_csrf_checks=True)
        client.force_login(self.alice)
        self.assertEqual(client.post(delete_url(entry)).status_code, 403)
        self.assertEqual(client.post(CLEAR, {"confirmation": "delete all my notes"}).status_code, 403)
        self.assertTrue(Entry.objects.filter(pk=entry.pk).exists())

    def test_deleting_everything_needs_the_typed_phrase(self) -> None:
        self.save()
        self.assertContains(self.client.get(CLEAR), "delete all my notes")
        response = self.client.post(CLEAR, {"confirmation": "yes"})
        self.assertContains(response, "Type exactly", status_code=400)
        self.assertTrue(Entry.objects.filter(codex=self.alice_codex).exists())
        self.client.post(CLEAR, {"confirmation": "delete all my notes"})
        self.assertFalse(Entry.objects.filter(codex=self.alice_codex).exists())


class ExportImportPageTest(PageTestCase):
    def test_export_is_a_streamed_attachment_that_imports_back(self) -> None:
        entry = self.save(title="t", content="c", tags=["x"])
        services.entry_update(
            codex=self.alice_codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": "c2"})
        )
        response = self.client.get(EXPORT)
        self.assertTrue(response.streaming)
        self.assertIn("attachment;", response["Content-Disposition"])
        self.assertEqual(response["Content-Type"], "application/json")
        raw = streamed(response)
        services.codex_clear(codex=self.alice_codex)
        response = self.client.post(IMPORT, {"file": SimpleUploadedFile("codex.json", raw)})
        self.assertContains(response, "Imported 1 of 1 note")
        again = json.loads(streamed(self.client.get(EXPORT)))
        # Exact but for the writers, which now say "import" (tests/test_writers_transfer.py).
        self.assertEqual(without_writers(again["entries"]), without_writers(json.loads(raw)["entries"]))
        response = self.client.post(IMPORT, {"file": SimpleUploadedFile("codex.json", raw)})
        self.assertContains(response, "Imported 0 of 1 note. 1 was already in your notebook")

    def test_a_bad_file_imports_nothing_and_lists_why(self) -> None:
        self.save(content="one")
        self.save(content="two")
        document = json.loads(streamed(self.client.get(EXPORT)))
        services.codex_clear(codex=self.alice_codex)
        document["entries"][1]["title"] = "bad\x00title"
        response = self.client.post(IMPORT, {"file": SimpleUploadedFile("c.json", json.dumps(document).encode())})
        self.assertContains(response, "Nothing was imported: 1 of 2 notes", status_code=400)
        self.assertContains(response, "control character", status_code=400)
        self.assertFalse(Entry.objects.filter(codex=self.alice_codex).exists())
        response = self.client.post(IMPORT, {"file": SimpleUploadedFile("c.json", b"not json")})
        self.assertContains(response, "this is not an Agent Codex export", status_code=400)

    @override_settings(CODEX_IMPORT_MAX_BYTES=1000)
    def test_the_page_states_the_size_limit_and_refuses_bigger_files(self) -> None:
        self.assertContains(self.client.get(IMPORT), "1000\xa0bytes")
        response = self.client.post(IMPORT, {"file": SimpleUploadedFile("c.json", b" " * 2000)})
        self.assertContains(response, "the limit here is 1000", status_code=400)
        response = self.client.post(IMPORT, {"file": SimpleUploadedFile("c.json", b" " * 200_000)})
        self.assertContains(response, "larger than the limit", status_code=413)

    def test_markdown_export_is_an_attachment(self) -> None:
        self.save(title="Readable", content="hello")
        response = self.client.get(reverse("mycodex:export_markdown"))
        self.assertIn(".md", response["Content-Disposition"])
        self.assertIn(b"## Readable", streamed(response))


class LinksTest(PageTestCase):
    def test_home_clients_and_nav_link_to_my_codex(self) -> None:
        for url in ["/", reverse("authserver:clients"), LIST]:
            with self.subTest(url=url):
                self.assertContains(self.client.get(url), f'href="{LIST}"')


class PagesAgreeWithToolsTest(TransactionTestCase):
    """The page and the tools see one codex: same search results, deletions visible at once."""

    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice")
        token = mint_access_token(user=self.alice, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=1))
        self.grant = check_bearer_token(token)
        self.client.force_login(self.alice)

    def tool(self, name: str, arguments: dict) -> dict:
        return success_of(call_tool_directly(self.grant, name, arguments))

    def tool_search_ids(self, arguments: dict) -> list[str]:
        ids, cursor = [], None
        while True:
            page = self.tool("field_notes_search", {**arguments, **({"cursor": cursor} if cursor else {})})
            ids += [entry["id"] for entry in page["entries"]]
            cursor = page.get("nextCursor")
            if not cursor:
                return ids

    def test_search_results_on_the_page_equal_the_tools(self) -> None:
        words = ["Straße", "STRASSE", "ﬁsh", "fish", "Fish tank", "plain"]
        for i in range(130):
            word = words[i % len(words)]
            self.tool(
                "field_notes_save",
                {
                    "requestId": f"r{i}",
                    "entry": {
                        "content": f"note {i} about {word}",
                        "tags": [f"t{i % 4}", word],
                        "relatedAgentIds": [f"a{i % 3}"],
                    },
                },
            )
        cases = [
            ({}, ""),
            ({"query": "strasse"}, "q=strasse"),
            ({"query": "fi"}, "q=fi"),
            ({"query": "FISH"}, "q=FISH"),
            ({"tag": "t1"}, "tag=t1"),
            ({"relatedAgentId": "a2"}, "agent=a2"),
            ({"query": "fish", "tag": "t2", "relatedAgentId": "a1"}, "q=fish&tag=t2&agent=a1"),
            ({"query": "nothing matches this"}, "q=nothing+matches+this"),
        ]
        for arguments, query in cases:
            with self.subTest(arguments=arguments):
                expected = self.tool_search_ids(arguments)
                by_id = listed_ids(self.client, f"{LIST}?order=id&{query}")
                newest = listed_ids(self.client, f"{LIST}?{query}")
                self.assertEqual(by_id, expected)
                self.assertEqual(sorted(newest), sorted(expected))
                self.assertEqual(len(newest), len(set(newest)))

    def test_a_deleted_entry_is_not_found_by_the_tools_at_once(self) -> None:
        saved = self.tool("field_notes_save", {"requestId": "r1", "entry": {"content": "forget me", "tags": ["x"]}})
        entry_id = saved["entry"]["id"]
        self.assertEqual(self.client.post(reverse("mycodex:delete", args=[entry_id])).status_code, 302)
        error = error_of(call_tool_directly(self.grant, "field_notes_get", {"id": entry_id}))
        self.assertEqual(error["code"], "not_found")
        self.assertEqual(self.tool("field_notes_search", {"query": "forget"})["entries"], [])
        self.assertEqual(self.tool("field_notes_search", {"tag": "x"})["entries"], [])
        update = call_tool_directly(
            self.grant, "field_notes_update", {"id": entry_id, "expectedRevision": 1, "entry": {"content": "back"}}
        )
        self.assertEqual(error_of(update)["code"], "not_found")
        # Its request key went with it: replaying the save creates a new entry.
        again = self.tool("field_notes_save", {"requestId": "r1", "entry": {"content": "forget me", "tags": ["x"]}})
        self.assertNotEqual(again["entry"]["id"], entry_id)
