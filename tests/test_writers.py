"""Who wrote this: every revision records the connected application whose token made the call,
through the real tool path, and the person's pages, counts, filter and the admin show it."""

import datetime as dt
import json

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TransactionTestCase
from django.test.utils import CaptureQueriesContext
from oauth2_provider.models import get_application_model

from authserver.core.tokens import OPERATOR_APPLICATION_NAME, mint_access_token
from mcp_endpoint.auth import check_bearer_token, check_token_checksum
from mcp_endpoint.listing import TOOLS_JSON_PATH, live_listing
from notebook import selectors, services
from notebook.models import Entry, EntryRevision
from notebook.representations import entry_dict
from notebook.selectors import WriterCounts
from tests.base import connect_application
from tests.mcp_client import call_tool_directly, success_of

BOTH = "notes:read notes:write"


class TwoApplicationsTestCase(TransactionTestCase):
    """Alice connects a desktop assistant and a coding agent; Bob uses the same desktop assistant.

    The story, written through the real tools/call handler with each application's grant:
    desktop saves A and B; coding updates A and saves C; desktop updates A; coding updates B.
    So A: r1 desktop, r2 coding, r3 desktop. B: r1 desktop, r2 coding. C: r1 coding.
    """

    def setUp(self) -> None:
        User = get_user_model()
        self.alice = User.objects.create_user("alice", password="alice-password")
        self.bob = User.objects.create_user("bob", password="bob-password")
        self.desktop, desktop_token = connect_application(self.alice, "Desktop assistant")
        self.coding, coding_token = connect_application(self.alice, "Coding agent")
        _, bob_desktop_token = connect_application(self.bob, "Desktop assistant", application=self.desktop)
        self.as_desktop = check_bearer_token(desktop_token)
        self.as_coding = check_bearer_token(coding_token)
        self.bob_as_desktop = check_bearer_token(bob_desktop_token)

        self.a = self.save(self.as_desktop, "a", {"title": "Plan A", "content": "first"})
        self.b = self.save(self.as_desktop, "b", {"title": "Plan B", "content": "bee"})
        self.update(self.as_coding, self.a, 1, {"title": "Plan A", "content": "second"})
        self.c = self.save(self.as_coding, "c", {"title": "Plan C", "content": "sea"})
        self.update(self.as_desktop, self.a, 2, {"title": "Plan A", "content": "third"})
        self.update(self.as_coding, self.b, 1, {"title": "Plan B", "content": "bee two"})
        self.bobs = self.save(self.bob_as_desktop, "b1", {"title": "Bob's", "content": "bob"})

    def save(self, grant, request_id: str, entry: dict) -> dict:
        result = call_tool_directly(grant, "field_notes_save", {"requestId": request_id, "entry": entry})
        return success_of(result)["entry"]

    def update(self, grant, entry: dict, expected: int, replacement: dict) -> dict:
        arguments = {"id": entry["id"], "expectedRevision": expected, "entry": replacement}
        return success_of(call_tool_directly(grant, "field_notes_update", arguments))["entry"]

    def writers(self, entry: dict) -> list[tuple]:
        return list(
            EntryRevision.objects.filter(entry_id=entry["id"])
            .order_by("revision")
            .values_list("revision", "writer_kind", "writer_application_id", "writer_client_id", "writer_name")
        )

    def by(self, application) -> tuple:
        return ("application", application.pk, application.client_id, application.name)

    @property
    def codex(self):
        return services.codex_for_user(user=self.alice)


class RevisionWriterTest(TwoApplicationsTestCase):
    def test_each_revision_names_the_application_that_wrote_it(self) -> None:
        self.assertEqual(
            self.writers(self.a), [(1, *self.by(self.desktop)), (2, *self.by(self.coding)), (3, *self.by(self.desktop))]
        )
        self.assertEqual(self.writers(self.b), [(1, *self.by(self.desktop)), (2, *self.by(self.coding))])
        self.assertEqual(self.writers(self.c), [(1, *self.by(self.coding))])
        self.assertEqual(self.writers(self.bobs), [(1, *self.by(self.desktop))])

    def test_it_records_the_scopes_of_the_token_that_made_the_call(self) -> None:
        _, read_only = connect_application(self.alice, "Coding agent", "notes:read", application=self.coding)
        self.assertEqual(set(EntryRevision.objects.values_list("writer_scopes", flat=True)), {BOTH})
        # A read-only token writes nothing, so its scopes never reach a revision.
        error = call_tool_directly(
            check_bearer_token(read_only), "field_notes_save", {"requestId": "r", "entry": {"content": "x"}}
        )
        self.assertTrue(error.is_error)

    def test_a_replayed_save_by_another_application_records_nothing_new(self) -> None:
        again = self.save(self.as_coding, "a", {"title": "Plan A", "content": "first"})
        self.assertEqual(again["revision"], 3)
        self.assertEqual([row[0] for row in self.writers(self.a)], [1, 2, 3])
        self.assertEqual(self.writers(self.a)[0][1:], self.by(self.desktop))

    def test_an_operator_minted_token_writes_as_the_operator_application(self) -> None:
        token = mint_access_token(user=self.alice, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=1))
        entry = self.save(check_bearer_token(token), "op", {"content": "from a headless job"})
        operator = get_application_model().objects.get(name=OPERATOR_APPLICATION_NAME)
        self.assertEqual(self.writers(entry), [(1, *self.by(operator))])

    def test_the_token_check_stays_one_query_and_carries_the_application(self) -> None:
        with self.assertNumQueries(1):
            grant = check_token_checksum(self.as_coding.token_checksum)
        self.assertEqual(
            (grant.application_id, grant.client_id, grant.application_name),
            (self.coding.pk, self.coding.client_id, "Coding agent"),
        )

    def test_the_tool_results_and_listing_do_not_change(self) -> None:
        # Every tool result is exactly the contract's Entry / search page: no writer anywhere.
        self.assertEqual(self.save(self.as_desktop, "a", {"title": "Plan A", "content": "first"}), self.current(self.a))
        got = success_of(call_tool_directly(self.as_coding, "field_notes_get", {"id": self.b["id"]}))
        self.assertEqual(got, {"entry": self.current(self.b)})
        page = success_of(call_tool_directly(self.as_coding, "field_notes_search", {}))
        self.assertEqual(sorted(page), ["coverage", "entries"])
        for result in (got, page):
            text = json.dumps(result)
            for word in (self.desktop.client_id, self.coding.client_id, "Coding agent", "writer"):
                self.assertNotIn(word, text)
        self.assertEqual(json.loads(TOOLS_JSON_PATH.read_text()), live_listing())

    def current(self, entry: dict) -> dict:
        return entry_dict(Entry.objects.get(pk=entry["id"]))


class CountsAndFilterTest(TwoApplicationsTestCase):
    def listed(self, query: str) -> set[str]:
        self.client.force_login(self.alice)
        page = self.client.get("/codex/" + query)
        self.assertEqual(page.status_code, 200)
        return {entry["id"] for entry in page.context["page"].entries}

    def test_the_counts_are_exact_and_only_this_codex(self) -> None:
        counts = selectors.writer_counts(codex=self.codex, client_ids=[self.desktop.client_id, self.coding.client_id])
        self.assertEqual(
            counts,
            {
                self.desktop.client_id: WriterCounts(wrote=2, created=2, last_changed=1),
                self.coding.client_id: WriterCounts(wrote=3, created=1, last_changed=2),
            },
        )

    def test_the_list_filters_by_client_id_or_application_id_in_both_orders(self) -> None:
        desktop = {self.a["id"], self.b["id"]}
        coding = {self.a["id"], self.b["id"], self.c["id"]}
        self.assertEqual(self.listed(f"?app={self.desktop.client_id}"), desktop)
        self.assertEqual(self.listed(f"?app={self.desktop.pk}"), desktop)
        self.assertEqual(self.listed(f"?app={self.coding.client_id}&order=id"), coding)
        self.assertEqual(self.listed(f"?app={self.coding.client_id}&q=sea"), {self.c["id"]})
        self.assertEqual(self.listed("?app=no-such-client"), set())

    def test_a_cursor_of_another_application_filter_is_refused(self) -> None:
        for _ in range(25):
            self.save(self.as_coding, f"more-{_}", {"content": f"note {_}"})
        self.client.force_login(self.alice)
        first = self.client.get(f"/codex/?app={self.coding.client_id}")
        cursor = first.context["next_url"].split("cursor=")[1]
        other = self.client.get(f"/codex/?app={self.desktop.client_id}&cursor={cursor}")
        self.assertEqual(other.status_code, 400)
        rest = self.client.get(f"/codex/?app={self.coding.client_id}&cursor={cursor}")
        self.assertEqual(len(first.context["page"].entries) + len(rest.context["page"].entries), 28)

    def test_the_pages_say_who_wrote_each_entry_and_revision(self) -> None:
        self.client.force_login(self.alice)
        page = self.client.get(f"/codex/entries/{self.a['id']}/").content.decode()
        self.assertIn("Written by <a", page)
        self.assertIn(f'href="/codex/?app={self.coding.client_id}"', page)
        history = [
            item.revision.writer.name for item in self.client.get(f"/codex/entries/{self.a['id']}/").context["history"]
        ]
        self.assertEqual(history, ["Desktop assistant", "Coding agent", "Desktop assistant"])
        self.assertEqual(page.count("written by <a"), 3)  # one per revision
        listing = self.client.get("/codex/")
        summary = next(entry for entry in listing.context["page"].entries if entry["id"] == self.b["id"])
        self.assertEqual(
            (summary["created_by"].name, summary["changed_by"].name), ("Desktop assistant", "Coding agent")
        )
        self.assertContains(listing, "last changed by")

    def test_the_list_asks_one_query_for_the_writers_of_a_whole_page(self) -> None:
        self.listed("")  # signs in and starts the session
        with CaptureQueriesContext(connection) as few:
            self.listed("")
        for n in range(10):
            self.save(self.as_coding, f"extra-{n}", {"content": f"extra {n}"})
        with CaptureQueriesContext(connection) as many:
            self.listed("")
        self.assertEqual(len(many), len(few))


class ConnectedApplicationsTest(TwoApplicationsTestCase):
    def test_each_application_shows_what_it_wrote_with_a_link(self) -> None:
        self.client.force_login(self.alice)
        page = self.client.get("/account/clients/")
        rows = {client["application"].name: client["wrote"] for client in page.context["clients"]}
        self.assertEqual(rows["Coding agent"], WriterCounts(wrote=3, created=1, last_changed=2))
        self.assertEqual(rows["Desktop assistant"], WriterCounts(wrote=2, created=2, last_changed=1))
        self.assertContains(
            page,
            f'href="/codex/?app={self.coding.client_id}">3 notes</a>: it created 1 and made the latest change to 2',
        )

    def test_the_page_queries_do_not_grow_with_the_applications(self) -> None:
        self.client.force_login(self.alice)
        with CaptureQueriesContext(connection) as two:
            self.client.get("/account/clients/")
        for n in range(3):
            _, token = connect_application(self.alice, f"Extra {n}")
            self.save(check_bearer_token(token), f"x{n}", {"content": "x"})
        with CaptureQueriesContext(connection) as five:
            page = self.client.get("/account/clients/")
        self.assertEqual(len(page.context["clients"]), 5)
        self.assertEqual(len(five), len(two))

    def test_revoking_offers_to_review_what_it_wrote_and_deletes_nothing(self) -> None:
        self.client.force_login(self.alice)
        response = self.client.post(f"/account/clients/{self.coding.pk}/revoke/", follow=True)
        self.assertEqual(response.redirect_chain[-1][0], f"/account/clients/?revoked={self.coding.pk}")
        self.assertContains(response, f'<a href="/codex/?app={self.coding.client_id}">review the 3 notes it wrote</a>')
        self.assertEqual(Entry.objects.filter(codex=self.codex).count(), 3)
        self.assertNotIn("Coding agent", [c["application"].name for c in response.context["clients"]])

    def test_the_revoke_notice_names_no_application_the_person_never_used(self) -> None:
        stranger = get_application_model().objects.create(
            name="Someone else's app", client_type="public", authorization_grant_type="authorization-code"
        )
        self.client.force_login(self.alice)
        page = self.client.get(f"/account/clients/?revoked={stranger.pk}")
        self.assertContains(page, "had not written any notes")
        self.assertNotContains(page, "Someone else")


class DeletedApplicationTest(TwoApplicationsTestCase):
    def test_old_revisions_keep_the_name_it_had_when_it_wrote(self) -> None:
        client_id = self.coding.client_id
        get_application_model().objects.filter(pk=self.desktop.pk).update(name="Desktop assistant 2")
        self.coding.delete()
        rows = set(
            EntryRevision.objects.filter(writer_client_id=client_id).values_list("writer_application", "writer_name")
        )
        self.assertEqual(rows, {(None, "Coding agent")})
        self.client.force_login(self.alice)
        entry_page = self.client.get(f"/codex/entries/{self.b['id']}/")
        self.assertContains(entry_page, "last changed by <a")
        self.assertContains(entry_page, ">Coding agent</a>")
        self.assertContains(entry_page, ">Desktop assistant</a>")  # the name it had then
        listed = self.client.get(f"/codex/?app={client_id}")
        self.assertEqual({e["id"] for e in listed.context["page"].entries}, {self.a["id"], self.b["id"], self.c["id"]})
        self.assertContains(listed, "Showing notes written by <strong>Coding agent</strong>")


class AdminWriterTest(TwoApplicationsTestCase):
    def test_the_admin_shows_the_writer_of_each_revision(self) -> None:
        operator = get_user_model().objects.create_superuser("operator", password="x")
        self.client.force_login(operator)
        page = self.client.get(f"/admin/notebook/entry/{self.b['id']}/change/")
        self.assertContains(page, f"Coding agent (client id {self.coding.client_id}; scopes {BOTH})")
        self.assertContains(page, f"Desktop assistant (client id {self.desktop.client_id}; scopes {BOTH})")
        self.coding.delete()
        page = self.client.get(f"/admin/notebook/entry/{self.b['id']}/change/")
        self.assertContains(page, "application since deleted")
