"""Words a person reads: what a minted token is called where it wrote, a file that is not an
export, and the title of the consent page when the request cannot be completed."""

import datetime as dt
import importlib

from django.apps import apps as django_apps
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import TestCase
from oauth2_provider.models import get_application_model

from authserver.core.tokens import OPERATOR_APPLICATION_NAME, mint_access_token
from mcp_endpoint.auth import check_bearer_token, writer_of
from notebook import services
from notebook.validation import parse_entry_input


class WordingTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.client.force_login(self.alice)

    def test_a_note_from_a_minted_token_is_written_by_a_command_line_token(self) -> None:
        token = mint_access_token(user=self.alice, scopes=["notes:read", "notes:write"], lifetime=dt.timedelta(hours=1))
        entry = services.entry_save(
            codex=services.codex_for_user(user=self.alice),
            request_id="r1",
            data=parse_entry_input({"content": "from a headless job"}),
            writer=writer_of(check_bearer_token(token)),
        )
        page = self.client.get(f"/codex/entries/{entry.id}/").content.decode()
        self.assertIn("a command-line token (mint_token)", page)
        self.assertNotIn("operator tokens", page)
        clients = self.client.get("/account/clients/").content.decode()
        self.assertIn("a command-line token (mint_token)", clients)
        self.assertIn("none: minted on the command line", clients)  # its "Returns to"

    def test_the_migration_renames_the_application_of_earlier_minted_tokens(self) -> None:
        migration = importlib.import_module("authserver.migrations.0002_command_line_token_name")
        Application = get_application_model()
        old = Application.objects.create(
            name=migration.OLD, client_type="confidential", authorization_grant_type="client-credentials"
        )
        migration.rename(django_apps, None)
        old.refresh_from_db()
        self.assertEqual(old.name, OPERATOR_APPLICATION_NAME)
        migration.rename_back(django_apps, None)
        old.refresh_from_db()
        self.assertEqual(old.name, migration.OLD)

    def test_a_file_that_is_not_json_is_not_an_export(self) -> None:
        response = self.client.post("/codex/import/", {"file": SimpleUploadedFile("notes.txt", b"Dear diary")})
        self.assertContains(response, "this is not an Agent Codex export (a JSON file from Export)", status_code=400)
        self.assertNotContains(response, "Expecting value", status_code=400)

    def test_the_refused_consent_page_is_not_titled_allow(self) -> None:
        page = self.client.get("/o/authorize/", {"client_id": "no-such-client", "response_type": "code"})
        text = page.content.decode()
        title = text.split("<title>")[1].split("</title>")[0]
        self.assertNotIn("Allow", title)
        self.assertIn("cannot be completed", title)
