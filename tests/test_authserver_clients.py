"""The connected-applications page (authserver.clients), without a live server."""

import datetime as dt

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

Application = get_application_model()
AccessToken = get_access_token_model()


class ConnectedApplicationsTest(TestCase):
    def setUp(self) -> None:
        self.alice = get_user_model().objects.create_user("alice", password="alice-password")
        self.client.force_login(self.alice)

    def connect(self, name: str, scope: str) -> None:
        application = Application.objects.create(
            name=name,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
        )
        AccessToken.objects.create(
            user=self.alice,
            application=application,
            token=f"token-{name}",
            expires=timezone.now() + dt.timedelta(hours=1),
            scope=scope,
        )

    def queries_for_the_page(self) -> int:
        with CaptureQueriesContext(connection) as counted:
            response = self.client.get("/account/clients/")
        self.assertEqual(response.status_code, 200)
        return len(counted.captured_queries)

    def test_it_shows_each_client_with_its_scopes_in_words(self) -> None:
        self.connect("Reader", "notes:read")
        self.connect("Writer", "notes:read notes:write")
        page = self.client.get("/account/clients/").content.decode()
        self.assertIn("Reader", page)
        self.assertIn("Read your notes, Write your notes", page)

    def test_the_number_of_queries_does_not_grow_with_the_clients(self) -> None:
        self.connect("First", "notes:read")
        one = self.queries_for_the_page()
        self.connect("Second", "notes:read")
        self.connect("Third", "notes:read notes:write")
        self.assertEqual(self.queries_for_the_page(), one)
