from django.contrib.auth import get_user_model

from notebook import services
from notebook.models import Entry
from notebook.validation import parse_entry_input
from tests.base import NotebookTestCase


class OperatorAdminTest(NotebookTestCase):
    def setUp(self) -> None:
        operator = get_user_model().objects.create_superuser("operator", password="x")
        self.client.force_login(operator)
        self.launch = self.save(content="launch notes", title="Launch checklist", tags=["launch"])
        self.other = self.save(content="other", title="Groceries", tags=["home"])
        services.entry_update(
            codex=self.alice_codex,
            entry_id=self.launch.id,
            expected_revision=1,
            data=parse_entry_input({"content": "launch notes v2", "title": "Launch checklist", "tags": ["launch"]}),
        )
        self.save(codex=self.bob_codex, content="bob's")

    def test_codexes_show_owner_entry_count_and_last_activity(self) -> None:
        page = self.client.get("/admin/notebook/codex/")
        self.assertEqual(page.status_code, 200)
        rows = {row.owner.username: row for row in page.context["cl"].result_list}
        self.assertEqual((rows["alice"].entry_count, rows["bob"].entry_count), (2, 1))
        self.assertEqual(rows["alice"].last_activity, Entry.objects.get(pk=self.launch.pk).updated_at)

    def test_entries_filter_by_codex_and_tag_and_search_by_id_and_title(self) -> None:
        def listed(query: str) -> set:
            page = self.client.get("/admin/notebook/entry/" + query)
            self.assertEqual(page.status_code, 200)
            return {entry.pk for entry in page.context["cl"].result_list}

        self.assertEqual(
            listed(f"?codex__id__exact={self.bob_codex.pk}"), set(self.bob_codex.entries.values_list("pk", flat=True))
        )
        self.assertEqual(listed("?tag=launch"), {self.launch.pk})
        self.assertEqual(listed("?tag=Launch"), set())
        self.assertEqual(listed(f"?q={self.other.pk}"), {self.other.pk})
        self.assertEqual(listed("?q=groceries"), {self.other.pk})

    def test_an_entry_shows_its_revisions_inline(self) -> None:
        page = self.client.get(f"/admin/notebook/entry/{self.launch.pk}/change/")
        self.assertEqual(page.status_code, 200)
        self.assertContains(page, "launch notes v2")
        self.assertContains(page, "launch notes")  # revision 1's snapshot
        self.assertEqual(len(page.context["inline_admin_formsets"][0].formset.queryset), 2)

    def test_notebook_data_is_read_only(self) -> None:
        self.assertEqual(self.client.get("/admin/notebook/entry/add/").status_code, 403)
        response = self.client.post(
            f"/admin/notebook/entry/{self.launch.pk}/change/", {"title": "hacked", "content": "hacked"}
        )
        self.assertEqual(response.status_code, 403)
        self.assertEqual(
            self.client.post(f"/admin/notebook/entry/{self.launch.pk}/delete/", {"post": "yes"}).status_code, 403
        )
        self.assertEqual(Entry.objects.get(pk=self.launch.pk).content, "launch notes v2")
        self.assertEqual(self.client.get("/admin/notebook/requestkey/").status_code, 200)
        self.assertEqual(self.client.get("/admin/notebook/codex/add/").status_code, 403)
