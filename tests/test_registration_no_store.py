"""The registration response carries a ``registration_access_token`` (RFC 7591 §3.2.1), and
RFC 7592's management answers carry it too: none of them may be cached (Cache-Control: no-store,
as RFC 6749 §5.1 asks of any response with a token, and Pragma: no-cache for HTTP/1.0 caches)."""

import json

from django.test import Client, TestCase

from tests.oauth_helpers import REDIRECT_URI


class RegistrationIsNeverCachedTest(TestCase):
    def register(self):
        body = {"redirect_uris": [REDIRECT_URI], "client_name": "Cache test", "token_endpoint_auth_method": "none"}
        return self.client.post("/o/register/", json.dumps(body), content_type="application/json")

    def assert_not_cached(self, response) -> None:
        self.assertEqual(response["Cache-Control"], "no-store")
        self.assertEqual(response["Pragma"], "no-cache")

    def test_the_registration_response_with_its_access_token_is_not_cached(self) -> None:
        response = self.register()
        self.assertEqual(response.status_code, 201, response.content)
        self.assertIn("registration_access_token", response.json())
        self.assert_not_cached(response)

    def test_the_management_answers_are_not_cached(self) -> None:
        registered = self.register().json()
        auth = {"HTTP_AUTHORIZATION": f"Bearer {registered['registration_access_token']}"}
        path = f"/o/register/{registered['client_id']}/"
        read = self.client.get(path, **auth)
        self.assertEqual(read.status_code, 200, read.content)
        self.assert_not_cached(read)
        refused = self.client.get(path, HTTP_AUTHORIZATION="Bearer not-the-token")
        self.assertGreaterEqual(refused.status_code, 400)
        self.assert_not_cached(refused)

    def test_the_management_endpoint_stays_an_api_without_csrf(self) -> None:
        # A client manages its registration with its bearer token; it has no cookie to send.
        registered = self.register().json()
        api = Client(enforce_csrf_checks=True)
        deleted = api.delete(
            f"/o/register/{registered['client_id']}/",
            HTTP_AUTHORIZATION=f"Bearer {registered['registration_access_token']}",
        )
        self.assertEqual(deleted.status_code, 204, deleted.content)
        self.assert_not_cached(deleted)
