"""Enterprise-Managed Authorization end to end, with real parts: a real OpenID provider as the
organization's IdP (oidc-provider over https on loopback, tests/oidc_provider/id_jag_provider.mjs,
with an RFC 8693 token-exchange grant that mints ID-JAGs as the draft's §4.3 says), and the SDK's
IdentityAssertionOAuthProvider as the client. The client signs the person in at the IdP (an ID
token), trades it there for an ID-JAG, and presents that here: it lists the tools and calls all four
with no consent page. ID-JAGs the real IdP mints for the wrong audience, resource, client or scopes
are refused with invalid_grant, storing nothing (tests/test_id_jag.py has every forged one)."""

import base64
import hashlib
import json
import secrets
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx2
from allauth.socialaccount.models import SocialAccount
from django.contrib.auth import get_user_model
from django.test import override_settings
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.shared.auth import JWT_BEARER_GRANT_TYPE
from oauth2_provider.models import AccessToken, Application, RefreshToken

from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.models import Organization
from authserver.models import OrganizationGrant
from mcp_endpoint.auth import token_checksum
from tests.live import LiveServerTestCase
from tests.loopback_http import self_signed
from tests.mcp_client import all_four_tools, with_client
from tests.oidc import OIDCProvider, sso_settings, through_provider_pages
from tests.sdk_oauth import MemoryStorage
from tests.test_id_jag import stored_counts

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
CALLBACK = "http://127.0.0.1:9/callback"
# The MCP client as the IdP knows it, and as this server knows it (the organization maps the two).
AT_IDP = {"client_id": "agent-at-acme", "client_secret": "idp-secret"}
OTHER_AT_IDP = {"client_id": "other-at-acme", "client_secret": "other-idp-secret"}
HERE, OTHER_HERE = ("codex-agent", "agent-secret"), ("codex-other-agent", "other-secret")


def idp_client(client: dict[str, str]) -> dict[str, Any]:
    return {
        **client,
        "redirect_uris": [CALLBACK],
        "grant_types": ["authorization_code", TOKEN_EXCHANGE],
        "response_types": ["code"],
        "token_endpoint_auth_method": "client_secret_post",
    }


class EnterpriseIdP:
    """The organization's IdP as a client sees it: sign a person in (an ID token), exchange it."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.http = httpx2.Client(verify=False, timeout=30)  # loopback, self-signed

    def close(self) -> None:
        self.http.close()

    def endpoint(self, name: str) -> str:
        """oidc-provider's endpoint ``name`` (``auth``, ``token``) under its issuer, a trailing slash or not."""
        return urljoin(self.issuer.rstrip("/") + "/", name)

    def id_token(self, login: str, client: dict[str, str] = AT_IDP) -> str:
        """The authorization code flow with PKCE through oidc-provider's development sign-in pages."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = {
            "client_id": client["client_id"],
            "response_type": "code",
            "scope": "openid email",
            "redirect_uri": CALLBACK,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s",
        }
        location = through_provider_pages(
            self.http, f"{self.endpoint('auth')}?{urlencode(query)}", login, until=CALLBACK
        )
        code = parse_qs(urlsplit(location).query)["code"][0]
        tokens = self.http.post(
            self.endpoint("token"),
            data={
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": CALLBACK,
                "code_verifier": verifier,
                **client,
            },
        )
        return tokens.json()["id_token"]

    def id_jag(self, id_token: str, *, audience: str, resource: str, scope: str | None = None, client=AT_IDP) -> str:
        """RFC 8693 token exchange for an ID-JAG (the extension's §4)."""
        data = {
            "grant_type": TOKEN_EXCHANGE,
            "requested_token_type": ID_JAG,
            "subject_token": id_token,
            "subject_token_type": ID_TOKEN,
            "audience": audience,
            "resource": resource,
            **client,
        }
        if scope:
            data["scope"] = scope
        answer = self.http.post(self.endpoint("token"), data=data)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert (body["issued_token_type"], body["token_type"]) == (ID_JAG, "N_A"), body
        return body["access_token"]


ORGANIZATION_AGENT = all_four_tools("granted by Acme", "acme")


class EnterpriseIdPTestCase(LiveServerTestCase):
    """A live server trusting a real IdP (``trailing_slash``: whose issuer ends in "/")."""

    idp: OIDCProvider
    trailing_slash = False

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.directory = tempfile.TemporaryDirectory(prefix="codex-idjag-")
        folder = Path(cls.directory.name)
        cert, key = self_signed(folder)
        policy = folder / "policy.json"
        policy.write_text(
            json.dumps(
                {
                    "client_ids": {"agent-at-acme": HERE[0], "other-at-acme": OTHER_HERE[0]},
                    "scopes": "notes:read notes:write",
                }
            )
        )
        cls.idp = OIDCProvider(
            [idp_client(AT_IDP), idp_client(OTHER_AT_IDP)],
            script="id_jag_provider.mjs",
            scheme="https",
            arguments=(str(cert), str(key), str(policy)),
            trailing_slash=cls.trailing_slash,
        ).start()
        provider = {
            "id": "acme",
            "name": "Acme staff",
            "issuer": cls.idp.issuer,
            "client_id": "codex-at-acme",
            "secret": "not-used-here",
            "domains": ["acme.test"],
            "id_jag": True,
        }
        cls.provider = provider
        cls.idp_settings = override_settings(**sso_settings(provider), CODEX_CIMD_ALLOW_LOOPBACK=True)
        cls.idp_settings.enable()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.idp_settings.disable()
        cls.idp.stop()
        cls.directory.cleanup()
        super().tearDownClass()

    def setUp(self) -> None:
        self.alice = self.make_user("alice", email="alice@acme.test")
        SocialAccount.objects.create(user=self.alice, provider="acme", uid="alice@acme.test")
        for client_id, secret in (HERE, OTHER_HERE):
            Application.objects.create(
                client_id=client_id,
                client_secret=secret,
                name=f"Agent {client_id}",
                client_type=Application.CLIENT_CONFIDENTIAL,
                authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
                redirect_uris=CALLBACK,
            )
        self.enterprise = EnterpriseIdP(self.idp.issuer)
        self.addCleanup(self.enterprise.close)
        self.issuer = self.live.base_url + "/o"

    def sdk_client(self, login: str, storage: MemoryStorage, *, scope: str | None = None):
        presented: list[str] = []

        async def assertion_provider(audience: str, resource: str) -> str:
            # The SDK names the audience (our issuer) and resource (our /mcp) the ID-JAG must carry.
            id_token = self.enterprise.id_token(login)
            presented.append(self.enterprise.id_jag(id_token, audience=audience, resource=resource, scope=scope))
            return presented[-1]

        provider = IdentityAssertionOAuthProvider(
            server_url=self.mcp_url,
            storage=storage,
            client_id=HERE[0],
            client_secret=HERE[1],
            issuer=self.issuer,
            assertion_provider=assertion_provider,
            scope=scope,
        )
        return provider, presented

    def present(self, assertion: str, client: tuple[str, str] = HERE, **extra: str) -> httpx2.Response:
        data = {
            "grant_type": JWT_BEARER_GRANT_TYPE,
            "assertion": assertion,
            "client_id": client[0],
            "client_secret": client[1],
            **extra,
        }
        return httpx2.post(self.live.base_url + "/o/token/", data=data)

    def assert_refused_storing_nothing(self, assertion: str, words: str, **kwargs: Any) -> None:
        before = stored_counts()
        response = self.present(assertion, **kwargs)
        self.assertEqual((response.status_code, response.json()["error"]), (400, "invalid_grant"), response.text)
        self.assertIn(words, response.json()["error_description"])
        self.assertEqual(stored_counts(), before)


class EnterpriseManagedAuthorizationTest(EnterpriseIdPTestCase):
    def test_the_sdk_client_lists_and_calls_all_four_tools_with_no_consent_page(self) -> None:
        storage = MemoryStorage()
        provider, presented = self.sdk_client("alice@acme.test", storage)
        result = with_client(self.mcp_url, None, "auto", ORGANIZATION_AGENT, auth=provider)
        self.assertEqual(
            result["tools"], ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"]
        )
        self.assertEqual(result["got"]["entry"]["content"], "granted by Acme")
        self.assertEqual([entry["id"] for entry in result["found"]["entries"]], [result["saved"]["entry"]["id"]])
        self.assertEqual(result["updated"]["entry"]["revision"], 2)
        self.assertEqual(len(presented), 1)  # one ID-JAG, one token, no page in between
        token = AccessToken.objects.get(token_checksum=token_checksum(storage.tokens.access_token))
        self.assertEqual(
            (token.user, token.application.client_id, token.resource), (self.alice, HERE[0], [self.mcp_url])
        )
        self.assertEqual(set(token.scope.split()), {"notes:read", "notes:write"})
        self.assertIsNone(storage.tokens.refresh_token)
        self.assertFalse(RefreshToken.objects.exists())
        grant = OrganizationGrant.objects.get()
        self.assertEqual((grant.user, grant.issuer), (self.alice, self.idp.issuer))
        self.assertEqual(self.alice.codex.entries.count(), 1)
        self.assertIn(
            JWT_BEARER_GRANT_TYPE,
            httpx2.get(self.live.base_url + "/.well-known/oauth-authorization-server/o").json()[
                "grant_types_supported"
            ],
        )

    def test_a_person_new_here_gets_an_account_on_first_use(self) -> None:
        storage = MemoryStorage()
        provider, _ = self.sdk_client("bea@acme.test", storage, scope="notes:read")
        result = with_client(self.mcp_url, None, "auto", lambda client: client.list_tools(), auth=provider)
        self.assertEqual(len(result.tools), 4)
        bea = SocialAccount.objects.get(provider="acme", uid="bea@acme.test").user
        self.assertEqual(AccessToken.objects.get().user, bea)
        self.assertEqual(AccessToken.objects.get().scope, "notes:read")

    def test_a_person_scim_provisioned_connects_at_once_with_sign_up_off(self) -> None:
        # The organization's whole path: its IdP provisions cleo over SCIM, and her agent connects
        # through an ID-JAG before she has ever signed in here; no account is made on first use.
        organization = Organization.objects.create(name="acme", provider_id="acme", domains=["acme.test"])
        credential = credentials.issue(organization=organization)
        body = {
            "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
            "userName": "cleo@acme.test",
            "emails": [{"value": "cleo@acme.test", "primary": True}],
        }
        created = httpx2.post(
            f"{self.live.base_url}/scim/v2/Users",
            json=body,
            headers={"Authorization": f"Bearer {credential}", "Content-Type": "application/scim+json"},
        )
        self.assertEqual(created.status_code, 201, created.text)
        cleo = get_user_model().objects.get(username="cleo@acme.test")
        with override_settings(**sso_settings({**self.provider, "signup": False}), CODEX_CIMD_ALLOW_LOOPBACK=True):
            storage = MemoryStorage()
            provider, _ = self.sdk_client("cleo@acme.test", storage)
            result = with_client(self.mcp_url, None, "auto", ORGANIZATION_AGENT, auth=provider)
        self.assertEqual(result["updated"]["entry"]["revision"], 2)
        self.assertEqual(AccessToken.objects.get().user, cleo)
        self.assertEqual(SocialAccount.objects.get(provider="acme", uid="cleo@acme.test").user, cleo)
        self.assertEqual(cleo.codex.entries.count(), 1)
        self.assertEqual(get_user_model().objects.filter(email__iexact="cleo@acme.test").count(), 1)

    def test_id_jags_the_real_idp_minted_for_something_else_are_refused(self) -> None:
        id_token = self.enterprise.id_token("alice@acme.test")
        mint = self.enterprise.id_jag
        with self.subTest("foreign audience"):
            assertion = mint(id_token, audience="https://other.example/o", resource=self.mcp_url)
            self.assert_refused_storing_nothing(assertion, "aud must be")
        with self.subTest("another resource"):
            assertion = mint(id_token, audience=self.issuer, resource="https://other.example/mcp")
            self.assert_refused_storing_nothing(assertion, "resource must be")
        with self.subTest("another client's ID-JAG"):
            other = self.enterprise.id_token("alice@acme.test", client=OTHER_AT_IDP)
            assertion = mint(other, audience=self.issuer, resource=self.mcp_url, client=OTHER_AT_IDP)
            self.assert_refused_storing_nothing(assertion, "issued to another client")
        with self.subTest("scopes outside the ID-JAG"):
            assertion = mint(id_token, audience=self.issuer, resource=self.mcp_url, scope="notes:read")
            self.assert_refused_storing_nothing(assertion, "none of the scopes", scope="notes:write")
        with self.subTest("replayed"):
            assertion = mint(id_token, audience=self.issuer, resource=self.mcp_url)
            self.assertEqual(self.present(assertion).status_code, 200)
            self.assert_refused_storing_nothing(assertion, "used before")
        with self.subTest("deactivated person"):
            get_user_model().objects.filter(pk=self.alice.pk).update(is_active=False)
            assertion = mint(id_token, audience=self.issuer, resource=self.mcp_url)
            self.assert_refused_storing_nothing(assertion, "deactivated")


class IssuerWithTrailingSlashTest(EnterpriseIdPTestCase):
    """An IdP that publishes its issuer with a trailing slash, as Auth0 does: configured as
    published, its ID-JAGs are trusted; the same issuer written without the slash is another one."""

    trailing_slash = True

    def test_the_sdk_client_connects_through_an_idp_whose_issuer_ends_in_a_slash(self) -> None:
        self.assertTrue(self.idp.issuer.endswith("/"))
        discovery = self.enterprise.http.get(self.enterprise.endpoint(".well-known/openid-configuration")).json()
        self.assertEqual(discovery["issuer"], self.idp.issuer)
        storage = MemoryStorage()
        provider, presented = self.sdk_client("alice@acme.test", storage)
        result = with_client(self.mcp_url, None, "auto", lambda client: client.list_tools(), auth=provider)
        self.assertEqual(len(result.tools), 4)
        self.assertEqual(
            json.loads(base64.urlsafe_b64decode(presented[0].split(".")[1] + "==="))["iss"], self.idp.issuer
        )
        self.assertEqual(OrganizationGrant.objects.get().issuer, self.idp.issuer)
        # Written without its slash, the configuration names another issuer than the IdP's.
        without = {**self.provider, "issuer": self.idp.issuer.rstrip("/")}
        with override_settings(**sso_settings(without), CODEX_CIMD_ALLOW_LOOPBACK=True):
            id_token = self.enterprise.id_token("alice@acme.test")
            assertion = self.enterprise.id_jag(id_token, audience=self.issuer, resource=self.mcp_url)
            self.assert_refused_storing_nothing(assertion, "not an identity provider this server trusts")
