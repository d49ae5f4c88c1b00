"""The Markdown export for Obsidian and other Markdown notebooks: a zip of one file per note,
each with YAML front matter (id, title, tags, related agents, revision, times) and the note's
content exactly as stored."""

import io
import zipfile

import yaml
from django.test import TestCase
from django.urls import reverse

from notebook import services
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase

ZIP = reverse("mycodex:export_markdown_zip")


def streamed(response) -> bytes:
    return b"".join(response.streaming_content)


class MarkdownZipExportTest(NotebookTestCase):
    def setUp(self) -> None:
        self.client.force_login(self.alice)

    def test_each_note_is_one_markdown_file_with_front_matter_and_its_exact_content(self) -> None:
        first = self.save(title="Launch plan", content="# Plan\n\n- step one\n---\nnot front matter", tags=["launch"])
        second = self.save(title="Launch plan", content="same title, another note", relatedAgentIds=["agent-7"])
        untitled = self.save(content='quotes " and: colons', tags=["a: b", "- c"])
        services.entry_update(
            codex=self.alice_codex,
            entry_id=first.id,
            expected_revision=1,
            data=parse_entry_input({"title": "Launch plan", "content": "v2 ünïcode ✓", "tags": ["launch"]}),
        )
        self.save(codex=self.bob_codex, content="bob's note")
        response = self.client.get(ZIP)
        self.assertEqual(response.status_code, 200)
        self.assertEqual(response["Content-Type"], "application/zip")
        self.assertEqual(response["Cache-Control"], "no-store")
        self.assertRegex(
            response["Content-Disposition"], r'^attachment; filename="alice-notebook-\d{8}-\d{6}\.markdown\.zip"$'
        )
        archive = zipfile.ZipFile(io.BytesIO(streamed(response)))
        self.assertIsNone(archive.testzip())
        files = {name: archive.read(name).decode() for name in archive.namelist()}
        self.assertEqual(len(files), 3)  # Alice's three notes, none of Bob's
        self.assertEqual(len(set(files)), 3)  # two notes with the same title get two files
        by_id = {}
        for name, text in files.items():
            self.assertTrue(name.endswith(".md"), name)
            self.assertTrue(text.startswith("---\n"), text)
            front, body = text[4:].split("\n---\n", 1)
            meta = yaml.safe_load(front)
            by_id[meta["id"]] = (name, meta, body)
        for entry in (first, second, untitled):
            name, meta, body = by_id[str(entry.id)]
            current = self.alice_codex.entries.get(pk=entry.pk)
            self.assertEqual(body, current.content)
            self.assertEqual(meta["revision"], current.revision)
            self.assertEqual(meta.get("title"), current.title)
            self.assertEqual(meta["tags"], current.tags)
            self.assertEqual(meta["related_agents"], current.related_agent_ids)
            self.assertIn(str(entry.id)[:8], name)
        self.assertEqual(by_id[str(first.id)][2], "v2 ünïcode ✓")
        self.assertEqual(by_id[str(untitled.id)][1]["tags"], ["a: b", "- c"])
        self.assertTrue(by_id[str(untitled.id)][0].startswith("untitled-"))

    def test_it_is_offered_beside_the_other_exports(self) -> None:
        self.save(content="one")
        self.assertContains(self.client.get(reverse("mycodex:list")), f'href="{ZIP}"')


class MarkdownZipNeedsSignInTest(TestCase):
    def test_an_anonymous_visitor_is_sent_to_sign_in(self) -> None:
        response = self.client.get(ZIP)
        self.assertEqual(response.status_code, 302)
        self.assertTrue(response["Location"].startswith("/accounts/login/"))
