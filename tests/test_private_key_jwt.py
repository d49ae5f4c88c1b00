"""ChatGPT's way of connecting, emulated from its documentation: a metadata document declaring
``private_key_jwt`` with a ``jwks_uri``, and RFC 7523 client assertions at the token endpoint
for the code and the refresh grant. Every assertion that is not exactly right is refused with
``invalid_client``, and nothing it sent is kept."""

import datetime as dt
import json
import time

from django.conf import settings
from django.test import Client, TestCase, override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from authserver.models import ClientKeys, SpentJti
from tests.hosted_clients import ASSERTION_TYPE, ChatGPTLike, DocumentsServer, ec_key, public_jwk, rsa_key
from tests.live import LiveServerTestCase
from tests.mcp_client import success_of, with_client
from tests.oauth_helpers import REDIRECT_URI, Browser, authorization_url, forms_of, pkce_pair

ALL_SCOPES = "notes:read notes:write"


def spent_jtis() -> int:
    """Assertion ids kept as spent (authserver.core.replay)."""
    return SpentJti.objects.count()


class ChatGPTFlowTestCase(LiveServerTestCase):
    def setUp(self) -> None:
        self.make_user("alice")
        self.browser = Browser(self.live.base_url, "alice", "alice-password")
        self.addCleanup(self.browser.close)
        self.documents = self.enterContext(DocumentsServer())
        self.chatgpt = ChatGPTLike(self.documents)
        self.token_endpoint = self.live.base_url + "/o/token/"

    def authorize(self, client: ChatGPTLike | None = None, scope: str = ALL_SCOPES) -> tuple[str, str]:
        """Sign in and approve; returns (code, verifier)."""
        client = client or self.chatgpt
        verifier, challenge = pkce_pair()
        url = authorization_url(
            self.live.base_url,
            client.client_id,
            code_challenge=challenge,
            code_challenge_method="S256",
            scope=scope,
            resource=self.mcp_url,
        )
        answer = self.browser.authorize(url)
        self.assertIn("code", answer, answer)
        return answer["code"], verifier

    def code_grant(self, code: str, verifier: str) -> dict[str, str]:
        return {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.chatgpt.document["redirect_uris"][0],
            "code_verifier": verifier,
            "resource": self.mcp_url,
        }

    def assert_invalid_client(self, response, words: str) -> None:
        self.assertEqual(response.status_code, 401, response.text)
        self.assertEqual(response.json()["error"], "invalid_client", response.text)
        self.assertIn(words, response.json().get("error_description", ""))


class ChatGPTConnectsTest(ChatGPTFlowTestCase):
    def test_the_metadata_advertises_private_key_jwt_and_its_algorithms(self) -> None:
        import httpx2

        metadata = httpx2.get(self.live.base_url + "/.well-known/oauth-authorization-server/o").json()
        self.assertIn("private_key_jwt", metadata["token_endpoint_auth_methods_supported"])
        self.assertIn("RS256", metadata["token_endpoint_auth_signing_alg_values_supported"])
        self.assertIn("ES256", metadata["token_endpoint_auth_signing_alg_values_supported"])
        self.assertIn("PS256", metadata["token_endpoint_auth_signing_alg_values_supported"])
        self.assertNotIn("HS256", metadata["token_endpoint_auth_signing_alg_values_supported"])
        self.assertTrue(metadata["client_id_metadata_document_supported"])

    def test_sign_in_consent_token_by_assertion_refresh_by_assertion_and_the_four_tools(self) -> None:
        code, verifier = self.authorize()
        self.assertTrue(ClientKeys.objects.filter(client_id=self.chatgpt.client_id).exists())
        granted = self.chatgpt.token_request(
            self.live.base_url, self.code_grant(code, verifier), self.chatgpt.assertion(self.token_endpoint)
        )
        self.assertEqual(granted.status_code, 200, granted.text)
        tokens = granted.json()
        self.assertEqual(tokens["scope"], ALL_SCOPES)

        refreshed = self.chatgpt.token_request(
            self.live.base_url,
            {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "resource": self.mcp_url},
            self.chatgpt.assertion(self.live.base_url + "/o"),  # the issuer is an audience too
        )
        self.assertEqual(refreshed.status_code, 200, refreshed.text)
        access_token = refreshed.json()["access_token"]
        self.assertNotEqual(access_token, tokens["access_token"])

        async def four_tools(client):
            listed = [tool.name for tool in (await client.list_tools()).tools]
            saved = success_of(
                await client.call_tool(
                    "field_notes_save", {"requestId": "r-1", "entry": {"content": "from ChatGPT", "tags": ["gpt"]}}
                )
            )["entry"]
            got = success_of(await client.call_tool("field_notes_get", {"id": saved["id"]}))["entry"]
            found = success_of(await client.call_tool("field_notes_search", {"tag": "gpt"}))["entries"]
            updated = success_of(
                await client.call_tool(
                    "field_notes_update",
                    {"id": saved["id"], "expectedRevision": 1, "entry": {"content": "from ChatGPT, again"}},
                )
            )["entry"]
            return listed, got, found, updated

        listed, got, found, updated = with_client(self.mcp_url, access_token, "legacy", four_tools)
        self.assertEqual(listed, ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"])
        self.assertEqual(got["content"], "from ChatGPT")
        self.assertEqual([entry["id"] for entry in found], [got["id"]])
        self.assertEqual(updated["revision"], 2)
        # The key set was fetched once, and served every assertion after from the cache.
        self.assertEqual(self.chatgpt.jwks_requests, 1)

    def test_an_empty_scope_as_chatgpt_has_been_seen_sending_gets_the_default(self) -> None:
        code, verifier = self.authorize(scope="")
        granted = self.chatgpt.token_request(
            self.live.base_url,
            dict(self.code_grant(code, verifier), scope=""),
            self.chatgpt.assertion(self.token_endpoint),
        )
        self.assertEqual(granted.status_code, 200, granted.text)
        self.assertEqual(granted.json()["scope"], "notes:read")

    def test_a_refresh_without_an_assertion_is_refused(self) -> None:
        code, verifier = self.authorize()
        tokens = self.chatgpt.token_request(
            self.live.base_url, self.code_grant(code, verifier), self.chatgpt.assertion(self.token_endpoint)
        ).json()
        refused = self.chatgpt.token_request(
            self.live.base_url, {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}, None
        )
        self.assert_invalid_client(refused, "send client_assertion")

    def test_a_rotated_key_is_found_by_fetching_the_set_again_once(self) -> None:
        code, verifier = self.authorize()
        self.chatgpt.token_request(
            self.live.base_url, self.code_grant(code, verifier), self.chatgpt.assertion(self.token_endpoint)
        )
        self.assertEqual(self.chatgpt.jwks_requests, 1)
        # The client rotates: a new key under a new kid.
        self.chatgpt.key, self.chatgpt.kid = rsa_key(), "chatgpt-rotated"
        self.chatgpt.publish()
        code, verifier = self.authorize()
        granted = self.chatgpt.token_request(
            self.live.base_url, self.code_grant(code, verifier), self.chatgpt.assertion(self.token_endpoint)
        )
        self.assertEqual(granted.status_code, 200, granted.text)
        self.assertEqual(self.chatgpt.jwks_requests, 2)
        # Unknown kids do not make the server fetch at will: one fetch per floor at most.
        for kid in ["unknown-1", "unknown-2", "unknown-3"]:
            refused = self.chatgpt.token_request(
                self.live.base_url,
                self.code_grant("no-code", verifier),
                self.chatgpt.assertion(self.token_endpoint, kid=kid),
            )
            self.assert_invalid_client(refused, "no key of the client's key set has kid")
        self.assertEqual(self.chatgpt.jwks_requests, 2)

    def test_es256_and_ps256_assertions_with_an_inline_key_set(self) -> None:
        for alg, key in [("ES256", ec_key()), ("PS256", rsa_key())]:
            with self.subTest(alg=alg):
                client = ChatGPTLike(self.documents, connector=f"inline-{alg.lower()}")
                client.key, client.kid, client.alg = key, f"inline-{alg}", alg
                client.document.update(
                    token_endpoint_auth_signing_alg=alg, jwks={"keys": [public_jwk(key, client.kid, alg)]}
                )
                del client.document["jwks_uri"]
                client.publish()
                code, verifier = self.authorize(client)
                granted = client.token_request(
                    self.live.base_url,
                    dict(self.code_grant(code, verifier)),
                    client.assertion(self.token_endpoint),
                )
                self.assertEqual(granted.status_code, 200, granted.text)


# A dozen refusals in a row for one client from one address: the failures' limit
# (authserver.clients.authentication, tests/test_hostile_front_door.py) is not what this is about.
@override_settings(CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT=1_000, CODEX_CLIENT_AUTH_FAILURES_PER_NETWORK=1_000)
class RefusedAssertionsTest(ChatGPTFlowTestCase):
    """Each refused before the code is looked at: the same code still works afterwards, no token
    was issued, and no refused assertion's jti was kept."""

    def test_every_negative_is_invalid_client_and_leaves_nothing(self) -> None:
        code, verifier = self.authorize()
        grant = self.code_grant(code, verifier)
        spent = self.chatgpt.assertion(self.token_endpoint)
        self.assertEqual(
            self.chatgpt.token_request(self.live.base_url, self.code_grant("x", verifier), spent).status_code, 400
        )
        stranger = rsa_key()
        endpoint = self.token_endpoint
        cases = {
            "no assertion": (None, "send client_assertion"),
            "a foreign key": (self.chatgpt.assertion(endpoint, key=stranger), "signature does not verify"),
            "a wrong audience": (self.chatgpt.assertion("https://elsewhere.example/token"), "aud must be"),
            "an expired assertion": (self.chatgpt.assertion(endpoint, exp=1_000_000_000), "expired"),
            "an assertion valid too long": (
                self.chatgpt.assertion(endpoint, exp=self.chatgpt.claims(endpoint)["iat"] + 3600),
                "at most 300 seconds",
            ),
            "a replayed jti": (spent, "used before"),
            "an HMAC signed with the public key": (self.chatgpt.hmac_with_public_key(endpoint), "not accepted"),
            "alg none": (self.chatgpt.unsigned(endpoint), "not accepted"),
            "another issuer": (
                self.chatgpt.assertion(endpoint, iss="https://other.example/client.json"),
                "iss must be",
            ),
            "another subject": (self.chatgpt.assertion(endpoint, sub="someone-else"), "sub must be"),
            "no jti": (self.chatgpt.assertion(endpoint, jti=None), "no jti claim"),
            "not a JWT": ("not.a.jwt", "not a signed JWT"),
        }
        tokens_before = AccessToken.objects.count()
        self.assertEqual(spent_jtis(), 1)
        for name, (assertion, words) in cases.items():
            with self.subTest(name):
                self.assert_invalid_client(self.chatgpt.token_request(self.live.base_url, grant, assertion), words)
        wrong_type = self.chatgpt.token_request(self.live.base_url, dict(grant, client_assertion_type="jwt"), None)
        self.assertEqual(wrong_type.status_code, 401, wrong_type.text)
        self.assertEqual(AccessToken.objects.count(), tokens_before)
        self.assertEqual(spent_jtis(), 1)  # the one assertion that was good
        # The code was never consumed: the right assertion still gets its token.
        granted = self.chatgpt.token_request(self.live.base_url, grant, self.chatgpt.assertion(endpoint))
        self.assertEqual(granted.status_code, 200, granted.text)

    def test_an_assertion_for_a_public_client_is_refused(self) -> None:
        del self.chatgpt.document["jwks_uri"]
        self.chatgpt.document["token_endpoint_auth_method"] = "none"
        self.chatgpt.publish()
        code, verifier = self.authorize()
        self.assertFalse(ClientKeys.objects.exists())
        refused = self.chatgpt.token_request(
            self.live.base_url, self.code_grant(code, verifier), self.chatgpt.assertion(self.token_endpoint)
        )
        self.assert_invalid_client(refused, "does not authenticate with private_key_jwt")


class RefusedDocumentsTest(ChatGPTFlowTestCase):
    """The person sees which document, what in it, and what its maker should change."""

    def refusal_page(self, document_changes: dict, *, drop: tuple[str, ...] = (), redirect_uri: str | None = None):
        self.chatgpt.document.update(document_changes)
        for member in drop:
            del self.chatgpt.document[member]
        self.chatgpt.publish()
        _, challenge = pkce_pair()
        params = {"code_challenge": challenge, "code_challenge_method": "S256"}
        if redirect_uri:
            params["redirect_uri"] = redirect_uri
        page = self.browser.open_authorization(authorization_url(self.live.base_url, self.chatgpt.client_id, **params))
        self.assertEqual(page.status_code, 400, page.text)
        self.assertIn("maker should change", page.text)
        self.assertIn(self.chatgpt.client_id, page.text)
        self.assertFalse(Application.objects.filter(client_id=self.chatgpt.client_id).exists() and not redirect_uri)
        self.assertEqual(
            forms_of(page.text), [form for form in forms_of(page.text) if "client_id" not in form["fields"]]
        )
        return page.text

    def test_private_key_jwt_without_keys(self) -> None:
        text = self.refusal_page({}, drop=("jwks_uri",))
        self.assertIn("neither &quot;jwks_uri&quot; nor &quot;jwks&quot;", text)
        self.assertFalse(ClientKeys.objects.exists())

    def test_a_shared_secret_method(self) -> None:
        text = self.refusal_page({"token_endpoint_auth_method": "client_secret_basic"})
        self.assertIn("a shared secret", text)

    def test_an_hmac_signing_algorithm(self) -> None:
        text = self.refusal_page({"token_endpoint_auth_signing_alg": "HS256"})
        self.assertIn("does not accept", text)

    def test_a_private_key_published_inline(self) -> None:
        jwk = json.loads(json.dumps(public_jwk(rsa_key(), "k", "RS256")))
        text = self.refusal_page({"jwks": {"keys": [dict(jwk, d="secret")]}}, drop=("jwks_uri",))
        self.assertIn("private or symmetric key", text)

    def test_a_document_that_cannot_be_fetched(self) -> None:
        self.documents.documents.clear()
        _, challenge = pkce_pair()
        url = authorization_url(
            self.live.base_url, self.chatgpt.client_id, code_challenge=challenge, code_challenge_method="S256"
        )
        page = self.browser.open_authorization(url)
        self.assertEqual(page.status_code, 400)
        self.assertIn("could not be read", page.text)
        self.assertIn("HTTP 404", page.text)

    def test_a_redirect_uri_the_document_does_not_list(self) -> None:
        text = self.refusal_page({}, redirect_uri="http://127.0.0.1:9/elsewhere")
        self.assertIn("http://127.0.0.1:9/elsewhere", text)
        self.assertIn("is not one of the redirect_uris it lists", text)


class AssertionClaimsTest(TestCase):
    """The claims' rules an assertion shares with every signed JWT this server verifies
    (authserver.clients.signed_jwt), at the token endpoint: a 400 invalid_grant says the client
    authenticated (the code is made up), a 401 invalid_client that its assertion was refused."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())
        cls.chatgpt = ChatGPTLike(cls.documents)

    def setUp(self) -> None:
        Application.objects.create(
            client_id=self.chatgpt.client_id,
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            registration_source=Application.RegistrationSource.CIMD,
            cimd_expires_at=timezone.now() + dt.timedelta(days=1),
        )
        ClientKeys.objects.create(
            client_id=self.chatgpt.client_id, jwks_uri=self.chatgpt.jwks_uri, signing_algorithm="RS256"
        )

    def present(self, **changes) -> tuple[int, str]:
        answer = Client().post(
            "/o/token/",
            {
                "grant_type": "authorization_code",
                "code": "made-up",
                "redirect_uri": REDIRECT_URI,
                "code_verifier": "v" * 43,
                "client_id": self.chatgpt.client_id,
                "client_assertion_type": ASSERTION_TYPE,
                "client_assertion": self.chatgpt.assertion(settings.CODEX_ISSUER_URL, **changes),
            },
        )
        return answer.status_code, answer.json().get("error_description", "")

    def test_a_jti_of_255_characters_is_accepted_and_one_of_256_refused(self) -> None:
        self.assertEqual(self.present(jti="j" * 255)[0], 400)
        self.assertEqual(
            self.present(jti="k" * 256), (401, "the assertion's jti must be a string of 1 to 255 characters")
        )

    def test_an_assertion_that_lives_longer_than_five_minutes_from_its_iat_is_refused(self) -> None:
        # RFC 7523 leaves iat optional; when an assertion names it, its lifetime counts from it.
        now = int(time.time())
        status, words = self.present(iat=now - 200, exp=now + 200)
        self.assertEqual(status, 401)
        self.assertIn("at most 300 seconds", words)
        self.assertEqual(self.present(iat=now - 200, exp=now + 100)[0], 400)
        self.assertEqual(self.present(iat=None, exp=now + 300)[0], 400)  # no iat: bounded from now
