"""Quotas (contract 6, resource_exhausted): entries and stored bytes per codex, kept in
the codex row by the services; tool calls per access token per minute."""

import json

from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import TransactionTestCase, override_settings

from notebook import quotas, services, transfer
from notebook.exceptions import ResourceExhausted
from notebook.models import Codex, Entry, EntryRevision
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase
from tests.clocks import one_rate_window
from tests.http_client import call_tool
from tests.live import LiveServerTestCase
from tests.test_concurrency import run_together


def usage(codex: Codex) -> tuple[int, int]:
    codex.refresh_from_db()
    return codex.entry_count, codex.stored_bytes


def stored_by_revisions(codex: Codex) -> int:
    total = 0
    for revision in EntryRevision.objects.filter(codex=codex):
        raw = {"content": revision.content, "tags": revision.tags, "relatedAgentIds": revision.related_agent_ids}
        if revision.title is not None:
            raw["title"] = revision.title
        if revision.provenance is not None:
            raw["provenance"] = revision.provenance
        total += quotas.input_bytes(parse_entry_input(raw))
    return total


class CodexQuotaTest(NotebookTestCase):
    def test_usage_follows_every_save_and_update_exactly(self) -> None:
        entry = self.save(content="héllo", title="t", tags=["a", "bé"], relatedAgentIds=["x"], provenance={"k": [1]})
        self.save(request_id="same", content="x")
        self.save(request_id="same", content="x")  # a replay stores nothing
        services.entry_update(
            codex=self.alice_codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": "new"})
        )
        self.assertEqual(usage(self.alice_codex), (2, stored_by_revisions(self.alice_codex)))
        self.assertEqual(usage(self.alice_codex)[1], (6 + 1 + 1 + 3 + 1 + len('{"k":[1]}')) + 1 + 3)
        self.assertEqual(usage(self.bob_codex), (0, 0))

    def test_a_save_past_the_entry_quota_is_resource_exhausted_and_writes_nothing(self) -> None:
        with override_settings(CODEX_QUOTA_ENTRIES=2):
            first = self.save(request_id="one")
            self.save(request_id="two")
            with self.assertRaises(ResourceExhausted) as refused:
                self.save(request_id="three")
            self.assertEqual(refused.exception.code, "resource_exhausted")
            self.assertIn("quota of 2 entries (CODEX_QUOTA_ENTRIES)", refused.exception.message)
            self.assertIn("retrying will not help", refused.exception.message)
            # A replay of a saved request and an update still work at the entry quota.
            self.assertEqual(self.save(request_id="one").id, first.id)
            services.entry_update(
                codex=self.alice_codex, entry_id=first.id, expected_revision=1, data=parse_entry_input({"content": "u"})
            )
            self.save(codex=self.bob_codex)  # another codex has its own count
        self.assertEqual(Entry.objects.filter(codex=self.alice_codex).count(), 2)
        self.assertEqual(usage(self.alice_codex)[0], 2)

    def test_a_write_past_the_byte_quota_is_resource_exhausted_and_writes_nothing(self) -> None:
        with override_settings(CODEX_QUOTA_STORED_BYTES=10):
            entry = self.save(content="x" * 6)
            with self.assertRaises(ResourceExhausted) as refused:
                services.entry_update(
                    codex=self.alice_codex,
                    entry_id=entry.id,
                    expected_revision=1,
                    data=parse_entry_input({"content": "y" * 5}),
                )
            self.assertIn("quota of 10 bytes (CODEX_QUOTA_STORED_BYTES", refused.exception.message)
            with self.assertRaises(ResourceExhausted):
                self.save(content="z" * 5)
            self.save(content="z" * 4)  # exactly at the quota
        entry.refresh_from_db()
        self.assertEqual(entry.revision, 1)
        self.assertEqual(usage(self.alice_codex), (2, 10))


class UsageOfDeletesAndImportsTest(NotebookTestCase):
    def test_deleting_an_entry_gives_its_entry_and_every_revisions_bytes_back(self) -> None:
        kept = self.save(content="kept")
        gone = self.save(content="gone", tags=["t"])
        services.entry_update(
            codex=self.alice_codex, entry_id=gone.id, expected_revision=1, data=parse_entry_input({"content": "again"})
        )
        services.entry_delete(codex=self.alice_codex, entry_id=gone.id)
        self.assertEqual(usage(self.alice_codex), (1, stored_by_revisions(self.alice_codex)))
        self.assertEqual(usage(self.alice_codex), (1, len(kept.content)))

    def test_clearing_a_codex_brings_its_usage_to_zero(self) -> None:
        for number in range(3):
            self.save(content=f"note {number}")
        services.codex_clear(codex=self.alice_codex)
        self.assertEqual(usage(self.alice_codex), (0, 0))

    def test_an_import_counts_its_entries_and_revisions(self) -> None:
        entry = self.save(content="one", title="t")
        services.entry_update(
            codex=self.alice_codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": "two"})
        )
        document = transfer.load_document("".join(transfer.export_json_chunks(codex=self.alice_codex)))
        services.codex_clear(codex=self.alice_codex)
        transfer.codex_import(codex=self.bob_codex, document=document)
        self.assertEqual(usage(self.bob_codex), (1, stored_by_revisions(self.bob_codex)))
        self.assertEqual(usage(self.bob_codex), (1, len("one") + len("t") + len("two")))

    def test_an_import_past_a_quota_writes_nothing_and_says_which_quota(self) -> None:
        for number in range(2):
            self.save(content=f"note {number}")
        document = transfer.load_document("".join(transfer.export_json_chunks(codex=self.alice_codex)))
        self.save(codex=self.bob_codex, content="bob's own")
        with override_settings(CODEX_QUOTA_ENTRIES=2), self.assertRaises(transfer.ImportRefused) as refused:
            transfer.codex_import(codex=self.bob_codex, document=document)
        self.assertIn("CODEX_QUOTA_ENTRIES", str(refused.exception))
        self.assertEqual(Entry.objects.filter(codex=self.bob_codex).count(), 1)
        self.assertEqual(usage(self.bob_codex)[0], 1)


class ConcurrentUsageTest(TransactionTestCase):
    def test_concurrent_saves_count_exactly_and_never_pass_the_quota(self) -> None:
        codex = services.codex_for_user(user=get_user_model().objects.create_user("carol"))
        identical = parse_entry_input({"content": "once"})
        run_together(lambda: services.entry_save(codex=codex, request_id="same", data=identical), count=8)
        self.assertEqual(usage(codex), (1, 4))
        counter = iter(range(1000))
        with override_settings(CODEX_QUOTA_ENTRIES=5):
            results = run_together(
                lambda: services.entry_save(codex=codex, request_id=f"r{next(counter)}", data=identical), count=8
            )
        refused = [r for r in results if isinstance(r, ResourceExhausted)]
        self.assertEqual(len(refused), 4, results)
        self.assertEqual(Entry.objects.filter(codex=codex).count(), 5)
        self.assertEqual(usage(codex), (5, 20))


class ToolCallRateTest(LiveServerTestCase):
    def setUp(self) -> None:
        cache.clear()
        self.alice = self.make_user("alice")

    def test_past_the_per_token_rate_calls_get_resource_exhausted_with_when_to_retry(self) -> None:
        token, other = self.token_for(self.alice), self.token_for(self.alice)
        with override_settings(CODEX_TOOL_CALLS_PER_MINUTE=3), one_rate_window():
            replies = [call_tool(self.mcp_url, token, "field_notes_search", {}).json() for _ in range(4)]
            fresh = call_tool(self.mcp_url, other, "field_notes_search", {}).json()
        self.assertEqual([r["result"].get("isError", False) for r in replies], [False, False, False, True])
        error = json.loads(replies[-1]["result"]["content"][0]["text"])["error"]
        self.assertEqual(error["code"], "resource_exhausted")
        self.assertRegex(
            error["message"],
            r"more than 3 tool calls this minute \(CODEX_TOOL_CALLS_PER_MINUTE\); "
            r"retry in \d+ seconds",
        )
        self.assertFalse(fresh["result"].get("isError", False))  # the count is per token


class BackfillMigrationTest(TransactionTestCase):
    """0003 fills EntryRevision.codex and the usage columns from existing rows."""

    def test_existing_rows_are_backfilled(self) -> None:
        executor = MigrationExecutor(connection)
        executor.migrate([("notebook", "0001_initial")])
        apps = executor.loader.project_state([("notebook", "0001_initial")]).apps
        User = apps.get_model("auth", "User")
        Codex0, Entry0, Revision0 = (apps.get_model("notebook", name) for name in ("Codex", "Entry", "EntryRevision"))
        codex = Codex0.objects.create(owner=User.objects.create(username="dora"))
        from django.utils import timezone

        now = timezone.now()
        entry = Entry0.objects.create(
            codex=codex, revision=2, content="abc", content_bytes=3, created_at=now, updated_at=now
        )
        for revision, content in ((1, "ab"), (2, "abc")):
            Revision0.objects.create(
                entry=entry, revision=revision, content=content, tags=["t"], related_agent_ids=[], recorded_at=now
            )
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
        self.assertEqual(set(EntryRevision.objects.values_list("codex_id", flat=True)), {codex.pk})
        self.assertEqual(
            Codex.objects.filter(pk=codex.pk).values_list("entry_count", "stored_bytes").get(), (1, 2 + 1 + 3 + 1)
        )


class UsageAdminTest(NotebookTestCase):
    def test_operators_see_each_codexs_usage_and_share_of_the_quotas(self) -> None:
        self.client.force_login(get_user_model().objects.create_superuser("operator", password="x"))
        self.save(content="x" * 100)
        with override_settings(CODEX_QUOTA_ENTRIES=4, CODEX_QUOTA_STORED_BYTES=1000):
            page = self.client.get("/admin/notebook/codex/")
        self.assertEqual(page.status_code, 200)
        self.assertContains(page, "100\xa0bytes")
        self.assertContains(page, "entries 25.0%, bytes 10.0%")
