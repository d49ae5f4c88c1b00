"""Enterprise-Managed Authorization (authserver.enterprise.id_jag): an ID-JAG from a trusted IdP, presented
with the jwt-bearer grant at /o/token/, gets a token for the person it names, with no consent
page, scopes the intersection, bound to /mcp, no refresh token. Every ID-JAG that is not exactly
right is refused with invalid_grant (a client that does not authenticate: invalid_client), and
nothing the client sent is kept: no token, no application, no person, no spent jti, no grant.

Here the IdP's discovery document and key set are served over https from loopback and the ID-JAGs
are signed in the test (each negative needs a forged one); tests/test_id_jag_idp.py has a real
OpenID provider mint them for the SDK's client."""

import datetime as dt
import hashlib
import hmac
import json
import time
import uuid
from types import SimpleNamespace
from typing import Any

import jwt
from allauth.socialaccount.models import SocialAccount
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import TestCase, override_settings
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, RefreshToken

from authserver.clients import cimd
from authserver.clients.assertions import ASSERTION_TYPE
from authserver.enterprise import id_jag
from authserver.enterprise.scim.models import Organization, ProvisionedPerson
from authserver.enterprise.sso import CodexSocialAccountAdapter
from authserver.models import OrganizationGrant, PendingRegistration, SpentJti
from tests.hosted_clients import ChatGPTLike, b64url, encoded_json, public_jwk, rsa_key
from tests.loopback_http import DocumentsServer
from tests.oidc import sso_settings

TOKEN_URL = "/o/token/"
ISSUER = settings.CODEX_ISSUER_URL
RESOURCE = settings.CODEX_RESOURCE_URL
BOTH = "notes:read notes:write"
KEY = rsa_key()
OTHER_KEY = rsa_key()


def provider_entry(origin: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": "acme",
        "name": "Acme staff",
        "issuer": origin,
        "client_id": "codex-at-acme",
        "secret": "not-used-here",
        "domains": ["acme.test"],
        "id_jag": True,
        **extra,
    }


def signed(claims: dict[str, Any], *, key: Any = KEY, typ: str | None = id_jag.TYP, alg: str = "RS256") -> str:
    headers = {"kid": "idp-1"}
    if typ is not None:
        headers["typ"] = typ
    return jwt.encode(claims, key, algorithm=alg, headers=headers)


def unsigned(claims: dict[str, Any]) -> str:
    return f"{encoded_json({'alg': 'none', 'typ': id_jag.TYP, 'kid': 'idp-1'})}.{encoded_json(claims)}."


def hmac_with_public_key(claims: dict[str, Any]) -> str:
    """HS256 keyed with the IdP's published public key (PEM), the classic confusion attack."""
    public_pem = KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = f"{encoded_json({'alg': 'HS256', 'typ': id_jag.TYP, 'kid': 'idp-1'})}.{encoded_json(claims)}"
    signature = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64url(signature)}"


def stored_counts() -> tuple[int, ...]:
    """How many of each thing an ID-JAG's grant can store: a refusal must change none of them."""
    return (
        AccessToken.objects.count(),
        RefreshToken.objects.count(),
        Application.objects.count(),
        get_user_model().objects.count(),
        SpentJti.objects.count(),
        OrganizationGrant.objects.count(),
    )


class IdJagTestCase(TestCase):
    documents: DocumentsServer

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.documents = cls.enterClassContext(DocumentsServer())
        origin = cls.documents.origin
        cls.documents.documents = {
            "/.well-known/openid-configuration": {"issuer": origin, "jwks_uri": origin + "/jwks"},
            "/jwks": {"keys": [public_jwk(KEY, "idp-1", "RS256")]},
        }
        cls.enterClassContext(override_settings(**sso_settings(provider_entry(origin)), CODEX_CIMD_ALLOW_LOOPBACK=True))

    @classmethod
    def setUpTestData(cls) -> None:
        cls.alice = get_user_model().objects.create_user("alice", email="alice@acme.test")
        SocialAccount.objects.create(user=cls.alice, provider="acme", uid="alice-at-acme")
        cls.agent = cls.client_with_secret("Acme agent", "agent-secret")
        cls.other_agent = cls.client_with_secret("Another agent", "other-secret")

    @staticmethod
    def client_with_secret(name: str, secret: str) -> Application:
        return Application.objects.create(
            name=name,
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
            client_secret=secret,
        )

    def claims(self, **changes: Any) -> dict[str, Any]:
        now = int(time.time())
        claims = {
            "iss": self.documents.origin,
            "sub": "alice-at-acme",
            "aud": ISSUER,
            "resource": RESOURCE,
            "client_id": self.agent.client_id,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "exp": now + 300,
            "scope": BOTH,
        }
        claims.update(changes)
        return {name: value for name, value in claims.items() if value is not None}

    def present(self, assertion: str, *, client: Application | None = None, secret: str = "agent-secret", **extra):
        client = client or self.agent
        data = {
            "grant_type": id_jag.GRANT_TYPE,
            "assertion": assertion,
            "client_id": client.client_id,
            "client_secret": secret,
            "resource": RESOURCE,
            **extra,
        }
        return self.client.post(TOKEN_URL, data)

    def assert_refused(self, response, error: str, words: str) -> None:
        body = response.json()
        self.assertEqual(body["error"], error, body)
        self.assertIn(words, body.get("error_description", ""), body)
        self.assertEqual(response.status_code, 401 if error == "invalid_client" else 400)

    def assert_refused_storing_nothing(self, assertion: str, words: str, error: str = "invalid_grant", **kwargs):
        before = stored_counts()
        response = self.present(assertion, **kwargs)
        self.assert_refused(response, error, words)
        self.assertEqual(stored_counts(), before, "a refused ID-JAG stored something")


class IdJagGrantTest(IdJagTestCase):
    def test_it_issues_a_token_for_the_linked_person_bound_to_mcp_with_no_refresh_token(self) -> None:
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            response = self.present(signed(self.claims()), scope=BOTH)
        self.assertEqual(response.status_code, 200, response.content)
        body = response.json()
        self.assertNotIn("refresh_token", body)
        self.assertEqual(set(body["scope"].split()), set(BOTH.split()))
        token = AccessToken.objects.get()
        self.assertEqual((token.user, token.application, token.resource), (self.alice, self.agent, [RESOURCE]))
        self.assertFalse(RefreshToken.objects.exists())
        grant = OrganizationGrant.objects.get()
        self.assertEqual((grant.user, grant.application, grant.issuer), (self.alice, self.agent, self.documents.origin))
        [line] = [record for record in logs.records if record.event == "token.granted"]
        self.assertEqual((line.grant, line.issuer, line.user_id), ("id_jag", self.documents.origin, self.alice.pk))
        self.assertEqual(line.grant_type, id_jag.GRANT_TYPE)
        # The token works where tokens work: the MCP endpoint accepts it (tests.test_id_jag_idp calls tools).
        self.assertEqual(SpentJti.objects.count(), 1)

    def test_the_scopes_are_the_intersection_of_the_request_and_the_id_jag(self) -> None:
        response = self.present(signed(self.claims(scope="notes:read")), scope=BOTH)
        self.assertEqual(response.json()["scope"], "notes:read")
        self.assertEqual(AccessToken.objects.get().scope, "notes:read")

    def test_without_a_requested_scope_it_gets_those_of_the_id_jag(self) -> None:
        response = self.present(signed(self.claims()))
        self.assertEqual(set(response.json()["scope"].split()), set(BOTH.split()))

    def test_without_a_requested_scope_it_gets_those_of_the_id_jag_this_server_offers(self) -> None:
        # An IdP may grant scopes of its own beside this server's (openid, another resource's):
        # asked for nothing, the client gets this server's share, as it would asking for them.
        response = self.present(signed(self.claims(scope="openid notes:read profile notes:write")))
        self.assertEqual(response.status_code, 200, response.content)
        self.assertEqual(set(response.json()["scope"].split()), set(BOTH.split()))
        self.assertEqual(set(AccessToken.objects.get().scope.split()), set(BOTH.split()))

    def test_a_public_client_is_refused_unless_the_operator_allows_public_clients(self) -> None:
        # The draft's security considerations: the grant SHOULD only be supported for
        # confidential clients; anyone who holds a public client's ID-JAG could redeem it.
        public = Application.objects.create(
            name="Public agent",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
        )

        def present_with_its_id_alone():
            return self.client.post(
                TOKEN_URL,
                {
                    "grant_type": id_jag.GRANT_TYPE,
                    "assertion": signed(self.claims(client_id=public.client_id)),
                    "client_id": public.client_id,
                },
            )

        before = stored_counts()
        refused = present_with_its_id_alone()
        self.assert_refused(refused, "unauthorized_client", "only from a confidential client")
        self.assertIn("CODEX_ID_JAG_PUBLIC_CLIENTS", refused.json()["error_description"])
        self.assertEqual(stored_counts(), before)
        with override_settings(CODEX_ID_JAG_PUBLIC_CLIENTS=True):
            response = present_with_its_id_alone()
        self.assertEqual(response.status_code, 200, response.content)
        self.assertEqual(AccessToken.objects.get().application, public)

    def test_an_issuer_published_with_a_trailing_slash_is_trusted_exactly_as_published(self) -> None:
        # Auth0's issuers end in "/": the discovery document, every ID-JAG's iss and the
        # configuration name "https://tenant.auth0.com/", and RFC 8414 §3.3 and OpenID Connect
        # Discovery §4.3 compare the issuer exactly as published.
        origin = self.documents.origin
        published = origin + "/"
        discovery = "/.well-known/openid-configuration"
        self.documents.documents[discovery] = {"issuer": published, "jwks_uri": origin + "/jwks"}
        self.addCleanup(
            self.documents.documents.__setitem__, discovery, {"issuer": origin, "jwks_uri": origin + "/jwks"}
        )
        with override_settings(**sso_settings(provider_entry(published))):
            response = self.present(signed(self.claims(iss=published)))
            self.assertEqual(response.status_code, 200, response.content)
            self.assertEqual(OrganizationGrant.objects.get().issuer, published)
            # The same issuer without its slash is another issuer, which nobody trusts.
            self.assert_refused_storing_nothing(signed(self.claims(iss=origin)), "not an identity provider")
        # Configured without the slash while the provider publishes it with one: its discovery
        # document names another issuer, and no key of it is used.
        with override_settings(**sso_settings(provider_entry(origin))):
            self.assert_refused_storing_nothing(signed(self.claims()), "names another issuer")

    def test_a_metadata_document_client_with_private_key_jwt_presents_its_id_jag(self) -> None:
        chatgpt = ChatGPTLike(self.documents)
        fetched = cimd.fetch_new(chatgpt.client_id, network="127.0.0.1")
        self.assertIsNotNone(fetched.application)
        data = {
            "grant_type": id_jag.GRANT_TYPE,
            "assertion": signed(self.claims(client_id=chatgpt.client_id)),
            "client_id": chatgpt.client_id,
            "client_assertion_type": ASSERTION_TYPE,
        }
        before = stored_counts()
        refused = self.client.post(TOKEN_URL, {**data, "client_assertion": chatgpt.assertion(ISSUER, key=OTHER_KEY)})
        self.assert_refused(refused, "invalid_client", "signature does not verify")
        self.assertEqual(stored_counts(), before)
        response = self.client.post(TOKEN_URL, {**data, "client_assertion": chatgpt.assertion(ISSUER)})
        self.assertEqual(response.status_code, 200, response.content)
        self.assertEqual(AccessToken.objects.get().application.client_id, chatgpt.client_id)
        # The organization approved it: its registration no longer waits to be removed.
        self.assertFalse(PendingRegistration.objects.exists())

    def test_an_unknown_person_gets_an_account_on_first_use_where_sign_up_is_on(self) -> None:
        response = self.present(signed(self.claims(sub="bea-at-acme", email="bea@acme.test")))
        self.assertEqual(response.status_code, 200, response.content)
        bea = SocialAccount.objects.get(provider="acme", uid="bea-at-acme").user
        self.assertEqual((bea.email, bea.has_usable_password()), ("bea@acme.test", False))
        self.assertEqual(AccessToken.objects.get().user, bea)

    def provision(self, username: str, email: str, *, provider_id: str = "acme", active: bool = True):
        """A person the organization provisioned through SCIM, who never signed in here."""
        organization, _ = Organization.objects.get_or_create(name=f"org-{provider_id}", provider_id=provider_id)
        person = get_user_model().objects.create_user(username, email=email, is_active=active)
        now = timezone.now()
        ProvisionedPerson.objects.create(
            user=person, organization=organization, user_name_key=username.lower(), created_at=now, modified_at=now
        )
        return person

    def test_a_person_the_organization_provisioned_is_linked_on_first_use_even_with_sign_up_off(self) -> None:
        # SCIM provisions cleo, then her agent presents an ID-JAG at once: she never signed in here.
        cleo = self.provision("cleo@acme.test", "cleo@acme.test")
        with override_settings(**sso_settings(provider_entry(self.documents.origin, signup=False))):
            claims = self.claims(sub="cleo-at-acme", email="Cleo@acme.test", email_verified=True)
            response = self.present(signed(claims))
            self.assertEqual(response.status_code, 200, response.content)
            self.assertEqual(AccessToken.objects.get().user, cleo)
            self.assertEqual(SocialAccount.objects.get(provider="acme", uid="cleo-at-acme").user, cleo)
            self.assertEqual(get_user_model().objects.filter(email__iexact="cleo@acme.test").count(), 1)
            # Later ID-JAGs find her by the subject alone, whatever the address becomes.
            again = self.present(signed(self.claims(sub="cleo-at-acme", email="cleo.new@acme.test")))
            self.assertEqual(again.status_code, 200, again.content)
            self.assertEqual(AccessToken.objects.filter(user=cleo).count(), 2)

    def test_a_provisioned_person_is_never_linked_by_an_unverified_address_or_by_another_organization(self) -> None:
        self.provision("cleo@acme.test", "cleo@acme.test")
        self.provision("dan@acme.test", "dan@acme.test", provider_id="other-idp")
        self.provision("finn@acme.test", "finn@acme.test", active=False)
        with override_settings(**sso_settings(provider_entry(self.documents.origin, signup=False))):
            for email_verified in (None, False, "true"):
                with self.subTest(email_verified=email_verified):
                    claims = self.claims(sub="cleo-at-acme", email="cleo@acme.test", email_verified=email_verified)
                    self.assert_refused_storing_nothing(signed(claims), "not made on first use")
            # dan was provisioned by an organization that signs in with another provider.
            claims = self.claims(sub="dan-at-acme", email="dan@acme.test", email_verified=True)
            self.assert_refused_storing_nothing(signed(claims), "not made on first use")
            claims = self.claims(sub="finn-at-acme", email="finn@acme.test", email_verified=True)
            self.assert_refused_storing_nothing(signed(claims), "deactivated")

    def test_a_provisioned_person_gone_before_the_link_is_made_gets_no_new_account_with_sign_up_off(self) -> None:
        # find_person saw cleo; SCIM deleted her before the grant's transaction linked her.
        with override_settings(**sso_settings(provider_entry(self.documents.origin, signup=False))):
            [provider] = id_jag.trusted_providers().values()
            claims = self.claims(sub="cleo-at-acme", email="cleo@acme.test", email_verified=True)
            with self.assertRaisesMessage(id_jag.Refused, "not made on first use"):
                id_jag.make_person(provider, claims)
        self.assertFalse(get_user_model().objects.filter(email="cleo@acme.test").exists())

    def test_the_metadata_advertises_the_grant_and_the_profile(self) -> None:
        data = self.client.get("/.well-known/oauth-authorization-server/o").json()
        self.assertIn(id_jag.GRANT_TYPE, data["grant_types_supported"])
        self.assertEqual(data["authorization_grant_profiles_supported"], [id_jag.PROFILE])
        with override_settings(CODEX_SSO_PROVIDERS=[]):
            data = self.client.get("/.well-known/oauth-authorization-server/o").json()
        self.assertNotIn(id_jag.GRANT_TYPE, data["grant_types_supported"])
        self.assertNotIn("authorization_grant_profiles_supported", data)

    def test_connected_applications_shows_it_granted_by_the_organization_and_revoking_ends_it(self) -> None:
        self.present(signed(self.claims()))
        self.client.force_login(self.alice)
        page = self.client.get("/account/clients/").content.decode()
        self.assertIn("Acme agent", page)
        self.assertIn("Granted by your organization, through Acme staff", page)
        self.client.post(f"/account/clients/{self.agent.pk}/revoke/")
        self.assertFalse(AccessToken.objects.exists())
        self.assertFalse(OrganizationGrant.objects.exists())
        self.assertNotIn("Acme agent", self.client.get("/account/clients/").content.decode())


def seconds_kept(kind: str) -> float:
    """How long from now the one row of the ``default`` cache whose key holds ``kind`` lives."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT expires FROM codex_cache WHERE cache_key LIKE %s", [f"%:{kind}:%"])
        [(expires,)] = cursor.fetchall()
    if isinstance(expires, str):  # SQLite's text, in UTC
        expires = dt.datetime.fromisoformat(expires)
    if expires.tzinfo is None:
        expires = expires.replace(tzinfo=dt.UTC)
    return (expires - timezone.now()).total_seconds()


class IdJagKeySetTest(IdJagTestCase):
    """The IdP's key set is fetched, checked and kept as a client's is (authserver.clients.key_sets)."""

    def serve_keys(self, keys: list[Any], *, cache_control: str | None = None) -> None:
        """Serve ``keys`` as the IdP's set from now on, with nothing of an earlier set kept."""
        cache.clear()
        original = self.documents.documents["/jwks"]
        self.documents.documents["/jwks"] = {"keys": keys}
        self.addCleanup(self.documents.documents.__setitem__, "/jwks", original)
        if cache_control is not None:
            self.documents.cache_control = cache_control
            self.addCleanup(setattr, self.documents, "cache_control", "max-age=600")

    def test_a_key_set_that_publishes_a_private_or_symmetric_key_is_not_trusted_at_all(self) -> None:
        good = public_jwk(KEY, "idp-1", "RS256")
        private = {**public_jwk(OTHER_KEY, "idp-2", "RS256"), "d": "c2VjcmV0"}
        symmetric = {"kty": "oct", "kid": "idp-3", "k": "c2VjcmV0"}
        for name, keys in {"private": [good, private], "symmetric": [good, symmetric]}.items():
            with self.subTest(name):
                self.serve_keys(keys)
                # Signed with the good key: the set that publishes a secret beside it is refused whole.
                self.assert_refused_storing_nothing(signed(self.claims()), "private or symmetric key")

    def test_a_key_set_that_is_not_one_is_refused(self) -> None:
        good = public_jwk(KEY, "idp-1", "RS256")
        cases = {
            "too many keys": ([good] * 33, "at most 32"),
            "a key without kty": ([good, {"kid": "idp-2"}], "not a JSON Web Key"),
            "a key that is not an object": ([good, "idp-2"], "not a JSON Web Key"),
            "no key": ([], "holds no key"),
        }
        for name, (keys, words) in cases.items():
            with self.subTest(name):
                self.serve_keys(keys)
                self.assert_refused_storing_nothing(signed(self.claims()), words)

    def test_a_failed_fetch_is_remembered_a_minute_as_a_clients_is(self) -> None:
        discovery = "/.well-known/openid-configuration"
        original = self.documents.documents.pop(discovery)
        self.addCleanup(self.documents.documents.__setitem__, discovery, original)
        self.assert_refused_storing_nothing(signed(self.claims()), "could not be fetched")
        self.assertGreater(seconds_kept("idp-jwks-failed"), 59)
        fetched = self.documents.fetched.get(discovery, 0)
        self.assert_refused_storing_nothing(signed(self.claims()), "could not be fetched")
        self.assertEqual(self.documents.fetched.get(discovery, 0), fetched)

    def test_the_key_set_is_kept_ten_minutes_at_most_whatever_its_cache_control_says(self) -> None:
        self.serve_keys([public_jwk(KEY, "idp-1", "RS256")], cache_control="max-age=86400")
        self.assertEqual(self.present(signed(self.claims())).status_code, 200)
        self.assertLessEqual(seconds_kept("idp-jwks"), 600)


class IdJagRefusalTest(IdJagTestCase):
    """Each negative: refused with invalid_grant (or invalid_client), storing nothing."""

    def test_a_wrong_typ_is_refused(self) -> None:
        self.assert_refused_storing_nothing(signed(self.claims(), typ="JWT"), "typ must be")
        self.assert_refused_storing_nothing(signed(self.claims(), typ=None), "typ must be")

    def test_an_untrusted_issuer_is_refused(self) -> None:
        assertion = signed(self.claims(iss="https://idp.elsewhere.example"), key=OTHER_KEY)
        self.assert_refused_storing_nothing(assertion, "not an identity provider this server trusts")

    def test_a_trusted_issuer_with_a_key_not_its_own_is_refused(self) -> None:
        self.assert_refused_storing_nothing(signed(self.claims(), key=OTHER_KEY), "signature does not verify")

    def test_a_foreign_audience_is_refused(self) -> None:
        self.assert_refused_storing_nothing(signed(self.claims(aud="https://other.example/o")), "aud must be")
        self.assert_refused_storing_nothing(signed(self.claims(aud=[ISSUER, "https://other.example"])), "aud must be")

    def test_another_resource_is_refused(self) -> None:
        assertion = signed(self.claims(resource="https://other.example/mcp"))
        self.assert_refused_storing_nothing(assertion, "resource must be")

    def test_an_id_jag_without_a_resource_is_refused(self) -> None:
        # The MCP extension makes resource REQUIRED, and the server MUST check it.
        self.assert_refused_storing_nothing(signed(self.claims(resource=None)), "has no resource claim")

    def test_another_resource_in_the_request_is_refused_as_invalid_target(self) -> None:
        before = stored_counts()
        response = self.present(signed(self.claims()), resource="https://other.example/mcp")
        self.assertEqual(response.json()["error"], "invalid_target")
        self.assertEqual(stored_counts(), before)

    def test_another_clients_id_jag_is_refused(self) -> None:
        assertion = signed(self.claims(client_id=self.other_agent.client_id))
        self.assert_refused_storing_nothing(assertion, "issued to another client")
        # and the other client cannot present ours
        self.assert_refused_storing_nothing(
            signed(self.claims()), "issued to another client", client=self.other_agent, secret="other-secret"
        )

    def test_an_expired_id_jag_is_refused(self) -> None:
        now = int(time.time())
        assertion = signed(self.claims(iat=now - 400, exp=now - 100))
        self.assert_refused_storing_nothing(assertion, "expired")

    def test_a_long_lived_id_jag_is_refused(self) -> None:
        now = int(time.time())
        self.assert_refused_storing_nothing(signed(self.claims(exp=now + 3600)), "lives too long")
        self.assert_refused_storing_nothing(signed(self.claims(iat=None)), "no iat claim")

    def test_a_replayed_id_jag_is_refused(self) -> None:
        assertion = signed(self.claims())
        self.assertEqual(self.present(assertion).status_code, 200)
        self.assert_refused_storing_nothing(assertion, "used before")

    def test_alg_none_is_refused(self) -> None:
        self.assert_refused_storing_nothing(unsigned(self.claims()), "alg 'none' is not accepted")

    def test_hmac_keyed_with_the_public_key_is_refused(self) -> None:
        self.assert_refused_storing_nothing(hmac_with_public_key(self.claims()), "alg 'HS256' is not accepted")

    def test_scopes_outside_the_id_jag_are_refused(self) -> None:
        assertion = signed(self.claims(scope="notes:read"))
        self.assert_refused_storing_nothing(assertion, "none of the scopes asked for", scope="notes:write")
        self.assert_refused_storing_nothing(signed(self.claims(scope=None)), "none of the scopes")

    def test_a_subject_longer_than_a_sign_in_link_holds_is_refused(self) -> None:
        # allauth's SocialAccount.uid holds 191 characters: a longer sub could never be linked
        # (PostgreSQL refuses the row), so it is refused before anything is written.
        limit = SocialAccount._meta.get_field("uid").max_length
        claims = self.claims(sub="s" * (limit + 1), email="bea@acme.test")
        self.assert_refused_storing_nothing(signed(claims), f"sub must be a string of 1 to {limit} characters")
        response = self.present(signed(self.claims(sub="s" * limit, email="bea@acme.test")))
        self.assertEqual(response.status_code, 200, response.content)

    def test_a_deactivated_person_is_refused(self) -> None:
        get_user_model().objects.filter(pk=self.alice.pk).update(is_active=False)
        self.assert_refused_storing_nothing(signed(self.claims()), "deactivated")

    def test_an_unknown_person_is_refused_when_sign_up_is_off(self) -> None:
        with override_settings(**sso_settings(provider_entry(self.documents.origin, signup=False))):
            assertion = signed(self.claims(sub="bea-at-acme", email="bea@acme.test"))
            self.assert_refused_storing_nothing(assertion, "not made on first use")

    def test_the_same_signup_setting_closes_sign_up_through_single_sign_on(self) -> None:
        adapter = CodexSocialAccountAdapter()
        for signup in (True, False):
            [app] = sso_settings(provider_entry(self.documents.origin, signup=signup))["SOCIALACCOUNT_PROVIDERS"][
                "openid_connect"
            ]["APPS"]
            sociallogin = SimpleNamespace(provider=SimpleNamespace(app=SimpleNamespace(settings=app["settings"])))
            self.assertIs(adapter.is_open_for_signup(None, sociallogin), signup)

    def test_an_unknown_person_is_never_matched_by_email(self) -> None:
        # alice's address, another subject: not alice, and no second account with her address.
        assertion = signed(self.claims(sub="someone-else", email="alice@acme.test"))
        self.assert_refused_storing_nothing(assertion, "already exists here and is not linked")
        assertion = signed(self.claims(sub="someone-else", email="eve@elsewhere.test"))
        self.assert_refused_storing_nothing(assertion, "allowed domain")

    def test_a_provider_not_trusted_for_id_jag_is_refused(self) -> None:
        with override_settings(**sso_settings(provider_entry(self.documents.origin, id_jag=False))):
            self.assert_refused_storing_nothing(signed(self.claims()), "not an identity provider this server trusts")

    def test_a_client_that_does_not_authenticate_is_refused_as_invalid_client(self) -> None:
        self.assert_refused_storing_nothing(signed(self.claims()), "", error="invalid_client", secret="wrong-secret")

    def test_garbage_is_refused_never_a_500(self) -> None:
        for assertion in ["", "not-a-jwt", "a.b.c", "x" * 20_000, encoded_json([1]) + "." + encoded_json({}) + "."]:
            with self.subTest(assertion=assertion[:20]):
                before = stored_counts()
                response = self.present(assertion)
                self.assertIn(response.json()["error"], {"invalid_grant", "invalid_request"}, response.content)
                self.assertEqual(stored_counts(), before)
        weird = self.claims(sub=12, jti=["x"], scope=["notes:read"])
        self.assert_refused_storing_nothing(signed(weird), "")
        self.assertEqual(json.loads(self.present(signed(self.claims(aud=None))).content)["error"], "invalid_grant")
