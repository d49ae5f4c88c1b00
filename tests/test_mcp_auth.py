"""The resource-server side of contract 8, over real HTTP."""

import datetime as dt

import httpx2
from django.contrib.auth import get_user_model
from django.test import SimpleTestCase
from oauth2_provider.models import get_access_token_model

from mcp_endpoint.auth import token_checksum
from mcp_endpoint.http import _challenge
from notebook.models import Entry
from tests.base import GrantTestCase
from tests.http_client import LEGACY, MODERN, OLDEST, call_tool, post, rpc_body
from tests.live import LiveServerTestCase

AccessToken = get_access_token_model()
SAVE_ARGS = {"requestId": "r1", "entry": {"content": "hello"}}


class BearerTokenTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.alice = self.make_user("alice")
        self.prm_url = self.live.base_url + "/.well-known/oauth-protected-resource/mcp"

    def assert_unauthorized(self, response, *, presented: bool, description: str | None = None) -> None:
        self.assertEqual(response.status_code, 401, response.text)
        challenge = response.headers["www-authenticate"]
        tail = f'resource_metadata="{self.prm_url}", scope="notes:read notes:write"'
        if presented:
            self.assertTrue(challenge.startswith('Bearer error="invalid_token", error_description="'), challenge)
            if description:
                self.assertIn(description, challenge)
        else:
            self.assertEqual(challenge, f"Bearer {tail}")
        self.assertTrue(challenge.endswith(tail), challenge)

    def list_tools(self, token: str | None, version: str = LEGACY):
        return post(self.mcp_url, rpc_body("tools/list", version=version), token=token, version=version)

    def test_a_missing_token_gets_401_with_resource_metadata_and_scope(self) -> None:
        for version in (OLDEST, LEGACY, MODERN):
            self.assert_unauthorized(self.list_tools(None, version), presented=False)

    def test_a_non_bearer_authorization_header_is_missing_a_token(self) -> None:
        response = post(self.mcp_url, rpc_body("tools/list"), headers={"Authorization": "Basic YWxpY2U6eA=="})
        self.assert_unauthorized(response, presented=False)

    def test_unknown_token_is_invalid(self) -> None:
        self.assert_unauthorized(self.list_tools("no-such-token"), presented=True, description="not recognized")

    def test_expired_token_is_invalid(self) -> None:
        token = self.token_for(self.alice)
        AccessToken.objects.filter(token_checksum=token_checksum(token)).update(
            expires=dt.datetime(2020, 1, 1, tzinfo=dt.UTC)
        )
        self.assert_unauthorized(self.list_tools(token), presented=True, description="expired")

    def test_revoked_token_is_invalid(self) -> None:
        token = self.token_for(self.alice)
        AccessToken.objects.get(token_checksum=token_checksum(token)).revoke()
        self.assert_unauthorized(self.list_tools(token), presented=True, description="revoked")

    def test_tokens_for_another_or_no_audience_are_invalid(self) -> None:
        for resource in (
            [],
            ["https://other.example/mcp"],
            [self.mcp_url, "https://other.example/mcp"],
            [self.mcp_url + "/"],
        ):
            with self.subTest(resource=resource):
                token = self.token_for(self.alice)
                AccessToken.objects.filter(token_checksum=token_checksum(token)).update(resource=resource)
                self.assert_unauthorized(self.list_tools(token), presented=True, description="not issued for")

    def test_an_inactive_users_token_is_invalid(self) -> None:
        token = self.token_for(self.alice)
        self.alice.is_active = False
        self.alice.save()
        self.assert_unauthorized(self.list_tools(token), presented=True)

    def test_a_token_in_the_query_string_is_refused(self) -> None:
        token = self.token_for(self.alice)
        response = post(self.mcp_url + f"?access_token={token}", rpc_body("tools/list"))
        self.assert_unauthorized(response, presented=False)
        self.assertIn("query string", response.json()["error_description"])

    def test_tokens_are_stored_hashed(self) -> None:
        token = self.token_for(self.alice)
        stored = AccessToken.objects.get(token_checksum=token_checksum(token))
        self.assertEqual(stored.token, "")
        self.assertFalse(AccessToken.objects.filter(token=token).exists())

    def test_a_read_only_token_can_search_but_not_save(self) -> None:
        token = self.token_for(self.alice, scopes=["notes:read"])
        for version in (OLDEST, LEGACY, MODERN):
            with self.subTest(version=version):
                search = call_tool(self.mcp_url, token, "field_notes_search", {}, version=version)
                self.assertEqual(search.status_code, 200)
                self.assertFalse(search.json()["result"]["isError"])
                save = call_tool(self.mcp_url, token, "field_notes_save", SAVE_ARGS, version=version)
                self.assertEqual(save.status_code, 403)
                self.assertEqual(
                    save.headers["www-authenticate"],
                    'Bearer error="insufficient_scope", error_description="This call needs the scope notes:write", '
                    f'resource_metadata="{self.prm_url}", scope="notes:read notes:write"',
                )
        self.assertFalse(self.alice.codex.entries.exists())

    def test_a_write_only_token_cannot_search(self) -> None:
        token = self.token_for(self.alice, scopes=["notes:write"])
        response = call_tool(self.mcp_url, token, "field_notes_search", {})
        self.assertEqual(response.status_code, 403)
        self.assertIn('scope="notes:read"', response.headers["www-authenticate"])

    def test_an_unknown_tool_needs_the_read_scope_then_gets_invalid_params(self) -> None:
        write_only = self.token_for(self.alice, scopes=["notes:write"])
        refused = call_tool(self.mcp_url, write_only, "field_notes_delete", {})
        self.assertEqual(refused.status_code, 403)
        self.assertIn('scope="notes:read"', refused.headers["www-authenticate"])
        read_only = self.token_for(self.alice, scopes=["notes:read"])
        answered = call_tool(self.mcp_url, read_only, "field_notes_delete", {})
        self.assertEqual(answered.status_code, 200, answered.text)
        self.assertEqual(answered.json()["error"]["code"], -32602)
        self.assertIn("Unknown tool", answered.json()["error"]["message"])

    def test_a_token_revoked_between_two_calls_is_refused_on_the_second(self) -> None:
        token = self.token_for(self.alice)
        first = call_tool(self.mcp_url, token, "field_notes_save", SAVE_ARGS)
        self.assertEqual(first.status_code, 200)
        AccessToken.objects.get(token_checksum=token_checksum(token)).revoke()
        second = call_tool(self.mcp_url, token, "field_notes_search", {})
        self.assert_unauthorized(second, presented=True)

    def test_a_bad_origin_gets_403_and_a_good_one_passes(self) -> None:
        token = self.token_for(self.alice)
        bad = post(self.mcp_url, rpc_body("tools/list"), token=token, headers={"Origin": "https://evil.example"})
        self.assertEqual(bad.status_code, 403)
        good = post(self.mcp_url, rpc_body("tools/list"), token=token, headers={"Origin": self.live.base_url})
        self.assertEqual(good.status_code, 200)

    def test_a_bad_host_is_refused(self) -> None:
        token = self.token_for(self.alice)
        response = post(self.mcp_url, rpc_body("tools/list"), token=token, headers={"Host": "evil.example"})
        self.assertEqual(response.status_code, 421)

    def test_the_trailing_slash_path_works_without_redirect(self) -> None:
        token = self.token_for(self.alice)
        response = post(self.mcp_url + "/", rpc_body("tools/list"), token=token)
        self.assertEqual(response.status_code, 200)
        self.assertEqual(len(response.json()["result"]["tools"]), 4)

    def test_protected_resource_metadata(self) -> None:
        for path in ["/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"]:
            with self.subTest(path=path):
                document = httpx2.get(self.live.base_url + path).json()
                self.assertEqual(document["resource"], self.mcp_url)
                self.assertEqual(document["authorization_servers"], [self.live.base_url + "/o"])
                self.assertEqual(document["scopes_supported"], ["notes:read", "notes:write"])
                self.assertEqual(document["bearer_methods_supported"], ["header"])


class AfreshCheckTest(GrantTestCase):
    """Inside the tool call, right before the service, the token is re-read (contract 8).

    The HTTP check has passed (its grant is in the request scope); then the token
    changes before the tool runs.
    """

    def setUp(self) -> None:
        super().setUp()
        self.stored = AccessToken.objects.filter(token_checksum=self.grant.token_checksum)

    def test_a_token_revoked_after_the_http_check_is_unauthenticated(self) -> None:
        self.stored.delete()
        self.assertEqual(self.call_error("field_notes_save", SAVE_ARGS)["code"], "unauthenticated")
        self.assertFalse(Entry.objects.exists())

    def test_a_scope_removed_after_the_http_check_is_permission_denied(self) -> None:
        self.stored.update(scope="notes:read")
        self.assertEqual(self.call_error("field_notes_save", SAVE_ARGS)["code"], "permission_denied")
        self.assertFalse(Entry.objects.exists())

    def test_a_token_expired_after_the_http_check_is_unauthenticated(self) -> None:
        self.stored.update(expires=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
        self.assertEqual(self.call_error("field_notes_search", {})["code"], "unauthenticated")

    def test_a_user_deactivated_after_the_http_check_is_unauthenticated(self) -> None:
        get_user_model().objects.filter(pk=self.alice.pk).update(is_active=False)
        self.assertEqual(self.call_error("field_notes_search", {})["code"], "unauthenticated")


class ProtocolVersionTest(LiveServerTestCase):
    def setUp(self) -> None:
        self.token = self.token_for(self.make_user("alice"))

    def test_the_handshake_versions_are_negotiated(self) -> None:
        for version in ["2025-11-25", "2025-06-18"]:
            with self.subTest(version=version):
                body = rpc_body(
                    "initialize",
                    {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
                )
                response = post(self.mcp_url, body, token=self.token, version=version)
                self.assertEqual(response.status_code, 200, response.text)
                result = response.json()["result"]
                self.assertEqual(result["protocolVersion"], version)
                self.assertEqual(result["serverInfo"]["name"], "agent-codex")
                self.assertNotIn("mcp-session-id", response.headers)  # stateless

    def test_server_discover_lists_2026_07_28(self) -> None:
        response = post(self.mcp_url, rpc_body("server/discover", version=MODERN), token=self.token, version=MODERN)
        self.assertEqual(response.status_code, 200, response.text)
        self.assertIn("2026-07-28", response.json()["result"]["supportedVersions"])

    def test_an_mcp_name_header_that_disagrees_with_the_body_cannot_dodge_the_scope_check(self) -> None:
        alice = get_user_model().objects.get(username="alice")
        body = rpc_body("tools/call", {"name": "field_notes_save", "arguments": SAVE_ARGS}, version=MODERN)
        forged = {"Mcp-Method": "tools/call", "Mcp-Name": "field_notes_search"}
        # The scopes are the body's call's: the guard never reads Mcp-Name.
        read_only = self.token_for(alice, scopes=["notes:read"])
        response = post(self.mcp_url, body, token=read_only, version=MODERN, headers=forged)
        self.assertEqual(response.status_code, 403, response.text)
        self.assertIn("notes:write", response.headers["www-authenticate"])
        # With every scope, the SDK refuses the body that names another tool, before any handler runs.
        response = post(self.mcp_url, body, token=self.token, version=MODERN, headers=forged)
        self.assertEqual(response.status_code, 400, response.text)
        self.assertIn("mcp-name header does not match", response.json()["error"]["message"])
        self.assertFalse(Entry.objects.exists())

    def test_a_legacy_batch_is_scope_checked_too(self) -> None:
        read_only = self.token_for(get_user_model().objects.get(username="alice"), scopes=["notes:read"])
        batch = [
            rpc_body("tools/call", {"name": "field_notes_search", "arguments": {}}, request_id=1),
            rpc_body("tools/call", {"name": "field_notes_save", "arguments": SAVE_ARGS}, request_id=2),
        ]
        response = post(self.mcp_url, batch, token=read_only)
        self.assertEqual(response.status_code, 403)
        self.assertFalse(Entry.objects.exists())


class ChallengeTest(SimpleTestCase):
    def test_quotes_and_backslashes_in_a_challenge_are_escaped(self) -> None:
        challenge = _challenge(error="invalid_token", description='say "hi" \\ bye', scopes=["notes:read"])
        self.assertIn('error_description="say \\"hi\\" \\\\ bye"', challenge)
