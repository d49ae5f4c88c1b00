"""The connected-applications page (authserver.people.connected), without a live server."""

import datetime as dt

from django.contrib.auth import get_user_model
from django.db import connection
from django.test import TestCase
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model

Application = get_application_model()
AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()


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

    def test_it_says_when_each_client_was_connected_and_last_got_a_token(self) -> None:
        self.connect("Reader", "notes:read")
        reader = Application.objects.get(name="Reader")
        at = dt.datetime(2026, 1, 2, 10, 30, tzinfo=dt.UTC)
        AccessToken.objects.filter(application=reader).update(created=at)
        RefreshToken.objects.create(user=self.alice, application=reader, token="refresh-reader", access_token=None)
        RefreshToken.objects.filter(application=reader).update(created=at - dt.timedelta(days=3))
        page = self.client.get("/account/clients/").content.decode()
        self.assertIn('<dt>Connected</dt><dd>since <time datetime="2025-12-30T10:30:00+00:00">2025-12-30</time>;', page)
        self.assertIn('last got a token <time datetime="2026-01-02T10:30:00+00:00">2026-01-02 10:30 UTC</time>', page)

    def test_the_number_of_queries_does_not_grow_with_the_clients(self) -> None:
        self.connect("First", "notes:read")
        one = self.queries_for_the_page()
        self.connect("Second", "notes:read")
        self.connect("Third", "notes:read notes:write")
        self.assertEqual(self.queries_for_the_page(), one)
