"""A person leaves: the account page (after signing in again and typing their username) and
``manage.py codex_deluser`` delete everything of theirs. Afterwards every table of the
database is walked, row by row, and nothing of theirs is found: no row pointing at their
account or codex, no value holding their username, email, note text, token or session, no
rate-limit counter of theirs; while what another person shares (an application both use)
stays. Their next tool call gets 401. It runs on whichever database the suite runs on
(make test runs both)."""

import datetime as dt
import hashlib
import io
from typing import Any

from allauth.account.models import EmailAddress
from allauth.mfa.models import Authenticator
from allauth.socialaccount.models import SocialAccount
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.db import connection
from django.test import Client, override_settings
from django.utils import timezone
from oauth2_provider.models import get_application_model, get_grant_model, get_refresh_token_model

from authserver.core.last_used import record_use
from authserver.people import leaving
from authserver.people.signin import attempts_key
from mcp_endpoint.auth import check_bearer_token, writer_of
from notebook import services
from notebook.models import Codex
from notebook.validation import parse_entry_input
from tests.base import connect_application
from tests.http_client import call_tool
from tests.live import LiveServerTestCase

NAME = "zelda7f3a"
EMAIL = "zelda7f3a@example.test"
NOTE = "zelda's secret plan qx81"


def rows_of_every_table() -> dict[str, list[dict[str, Any]]]:
    """Every row of every table, as {column: value}."""
    tables = {}
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            columns = [column[0] for column in cursor.description]
            tables[table] = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    return tables


def references(table: str) -> dict[str, str]:
    """{column: the table it points at} for the foreign keys of ``table``."""
    with connection.cursor() as cursor:
        return {column: target for column, (_, target) in connection.introspection.get_relations(cursor, table).items()}


@override_settings(ACCOUNT_REAUTHENTICATION_TIMEOUT=3600)
class AccountDeletionTest(LiveServerTestCase):
    def setUp(self) -> None:
        User = get_user_model()
        self.zelda = User.objects.create_user(NAME, email=EMAIL, password=f"{NAME}-password")
        self.bob = User.objects.create_user("bob", password="bob-password")
        EmailAddress.objects.create(user=self.zelda, email=EMAIL, verified=True, primary=True)
        Authenticator.objects.create(user=self.zelda, type=Authenticator.Type.TOTP, data={"secret": "S" * 32})
        SocialAccount.objects.create(user=self.zelda, provider="acme", uid=f"{NAME}-at-acme")
        codex = services.codex_for_user(user=self.zelda)
        self.only_hers, self.token = connect_application(self.zelda, f"{NAME}'s own client")
        self.shared, _ = connect_application(self.bob, "shared client")
        connect_application(self.zelda, "shared client", application=self.shared)
        entry = services.entry_save(
            codex=codex,
            request_id=f"{NAME}-request",
            data=parse_entry_input({"content": NOTE, "title": NOTE, "tags": [NAME], "relatedAgentIds": [NAME]}),
            writer=writer_of(check_bearer_token(self.token)),
        )
        services.entry_update(
            codex=codex, entry_id=entry.id, expected_revision=1, data=parse_entry_input({"content": NOTE + " 2"})
        )
        bob_codex = services.codex_for_user(user=self.bob)
        services.entry_save(codex=bob_codex, request_id="bob-1", data=parse_entry_input({"content": "bob's"}))
        get_grant_model().objects.create(
            user=self.zelda,
            application=self.only_hers,
            code=f"{NAME}-code",
            expires=timezone.now() + dt.timedelta(minutes=1),
            redirect_uri="http://127.0.0.1:9/callback",
            code_challenge="c" * 43,
            code_challenge_method="S256",
        )
        get_refresh_token_model().objects.create(user=self.zelda, application=self.only_hers, token=f"{NAME}-refresh")
        record_use(self.zelda.pk, self.only_hers.pk, timezone.now())
        record_use(self.zelda.pk, self.shared.pk, timezone.now())
        record_use(self.bob.pk, self.shared.pk, timezone.now())
        LogEntry.objects.create(  # an operator's edit of her account, in the admin's history
            user=self.bob,
            content_type=ContentType.objects.get_for_model(self.zelda),
            object_id=str(self.zelda.pk),
            object_repr=NAME,
            action_flag=CHANGE,
        )
        self.codex_id = codex.pk
        self.user_id = self.zelda.pk
        self.browser = Client()
        self.browser.force_login(self.zelda)
        other_browser = Client()
        other_browser.force_login(self.zelda)
        # A failed sign-in: a rate-limit counter of hers.
        Client().post("/accounts/login/", {"login": NAME, "password": "wrong"})

    def assert_nothing_of_hers_is_left(self) -> None:
        problems = []
        # allauth keeps a counter under the SHA-256 of the account's key.
        markers = [NAME, EMAIL, NOTE, hashlib.sha256(attempts_key(NAME).encode()).hexdigest()]
        for table, rows in rows_of_every_table().items():
            pointers = references(table)
            for row in rows:
                for column, value in row.items():
                    target = pointers.get(column)
                    if target == get_user_model()._meta.db_table and value == self.user_id:
                        problems.append(f"{table}.{column} points at her account: {row}")
                    if target == Codex._meta.db_table and value == self.codex_id:
                        problems.append(f"{table}.{column} points at her codex: {row}")
                    text = value.decode(errors="replace") if isinstance(value, bytes | memoryview) else str(value)
                    problems += [f"{table}.{column} holds {marker!r}" for marker in markers if marker in text]
        for session in Session.objects.all():
            if str(session.get_decoded().get("_auth_user_id")) == str(self.user_id):
                problems.append(f"a session of hers: {session.session_key}")
        self.assertEqual(problems, [], "\n".join(problems))
        # What Bob shares stays: his account, codex, and the application both used.
        self.assertTrue(get_application_model().objects.filter(pk=self.shared.pk).exists())
        self.assertTrue(Codex.objects.filter(owner=self.bob).exists())
        # Her next tool call is refused.
        answer = call_tool(self.mcp_url, self.token, "field_notes_search", {})
        self.assertEqual(answer.status_code, 401, answer.text)

    def test_the_account_page_deletes_everything_of_hers_after_she_signs_in_again(self) -> None:
        # Before: her token works.
        self.assertEqual(call_tool(self.mcp_url, self.token, "field_notes_search", {}).status_code, 200)
        page = self.browser.get("/account/delete/")
        self.assertEqual(page.status_code, 302)
        self.assertIn("/accounts/reauthenticate/", page["Location"])
        signed_in_again = self.browser.post(page["Location"], {"password": f"{NAME}-password"})
        self.assertEqual(signed_in_again.status_code, 302, signed_in_again.content[:500])
        confirm = self.browser.get("/account/delete/")
        self.assertContains(confirm, "Delete your account?")
        self.assertContains(confirm, f"{NAME}&#x27;s own client")
        wrong = self.browser.post("/account/delete/", {"confirmation": "bob"})
        self.assertContains(wrong, "exactly to confirm")
        self.assertTrue(get_user_model().objects.filter(pk=self.user_id).exists())
        done = self.browser.post("/account/delete/", {"confirmation": NAME}, follow=True)
        self.assertContains(done, "Your account and everything in it are deleted")
        self.assertNotIn("_auth_user_id", self.browser.session)
        self.assert_nothing_of_hers_is_left()

    def test_the_operator_command_does_the_same(self) -> None:
        out = io.StringIO()
        call_command("codex_deluser", NAME, "--yes", stdout=out)
        self.assertIn(f"deleted {NAME}", out.getvalue())
        self.assert_nothing_of_hers_is_left()

    def test_a_run_stopped_half_way_finishes_when_run_again(self) -> None:
        from unittest import mock

        with (
            mock.patch.object(leaving, "_remove_the_rest", side_effect=RuntimeError("stopped")),
            self.assertRaises(RuntimeError),
        ):
            leaving.account_delete(user=self.zelda, by="operator")
        self.assertEqual(call_tool(self.mcp_url, self.token, "field_notes_search", {}).status_code, 401)
        call_command("codex_deluser", NAME, "--yes", stdout=io.StringIO())
        self.assert_nothing_of_hers_is_left()
