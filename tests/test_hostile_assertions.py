"""Generated hostile input for ``private_key_jwt``: the token endpoint's assertion parameters
(headers, claims and signatures from hostile JSON, and plain hostile texts), and metadata
documents whose key members (``token_endpoint_auth_method``, ``jwks_uri``, ``jwks``,
``token_endpoint_auth_signing_alg``) are hostile; and for ID-JAGs, hostile headers and claims
truly signed by a trusted IdP's key (the one verification of a signed JWT, then the ID-JAG's own
claims and the person it names). After every call: no 5xx, no ERROR line or
traceback in the logs, and a database only the services could have written
(``tests.hostile``), as ``tests.test_hostile_input`` checks every other surface."""

import datetime as dt
import uuid
from typing import Any

import jwt
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, override_settings
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase
from oauth2_provider.models import get_application_model

from authserver.clients.signed_jwt import MAX_JWT_CHARS
from authserver.enterprise import id_jag
from authserver.models import ClientKeys
from tests.hosted_clients import ASSERTION_TYPE, ChatGPTLike, DocumentsServer, b64url, encoded_json, public_jwk, rsa_key
from tests.hostile import assert_consistent, emitted_logs
from tests.oauth_helpers import REDIRECT_URI, pkce_pair
from tests.oidc import sso_settings
from tests.test_hostile_input import HOSTILE, form_body, hostile_json, hostile_text

CLAIMS = ["iss", "sub", "aud", "exp", "iat", "nbf", "jti"]


@override_settings(CODEX_CIMD_RATE_LIMIT=1_000_000)
class HostileAssertionsTest(HypothesisTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.documents = DocumentsServer().__enter__()
        # Not test data: a key and a server cannot be deep-copied for each test.
        cls.chatgpt = ChatGPTLike(cls.documents)
        cls.assertion_strategy = cls.assertions()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.documents.__exit__(None, None, None)

    @classmethod
    def setUpTestData(cls) -> None:
        cls.alice = get_user_model().objects.create_user("alice", password="alice-password")
        Application = get_application_model()
        Application.objects.create(
            client_id=cls.chatgpt.client_id,
            name="ChatGPT",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            registration_source=Application.RegistrationSource.CIMD,
            cimd_expires_at=timezone.now() + dt.timedelta(days=1),
        )
        ClientKeys.objects.create(
            client_id=cls.chatgpt.client_id, jwks_uri=cls.chatgpt.jwks_uri, signing_algorithm="RS256"
        )

    def post(self, client: Client, path: str, pairs: list[tuple[str, str]]):
        with emitted_logs() as logs:
            response = client.post(path, data=form_body(pairs), content_type="application/x-www-form-urlencoded")
        self.assertLess(response.status_code, 500, response.content[:300])
        self.assertEqual(logs.errors(), [])
        self.assertEqual(logs.tracebacks(), [])
        assert_consistent(self)
        return response

    @classmethod
    def assertions(cls) -> st.SearchStrategy[str]:
        """Plain hostile texts; hostile headers and claims with a random signature; and hostile
        claims (beside good ones) truly signed with the client's key."""
        endpoint = "http://testserver/o/token/"
        header = st.fixed_dictionaries(
            {"alg": st.sampled_from(["RS256", "HS256", "none", "ES256", "PS256"]) | hostile_json},
            optional={"kid": st.just(cls.chatgpt.kid) | hostile_json, "typ": hostile_json, "jwk": hostile_json},
        )
        claims = st.fixed_dictionaries({}, optional={name: hostile_json for name in CLAIMS})
        forged = st.builds(
            lambda h, c, signature: f"{encoded_json(h)}.{encoded_json(c)}.{b64url(signature)}",
            header,
            claims,
            st.binary(max_size=64),
        )
        signed = claims.map(
            lambda changes: cls.chatgpt.signed_raw(
                {"alg": "RS256", "kid": cls.chatgpt.kid}, {**cls.chatgpt.claims(endpoint), **changes}
            )
        )
        return hostile_text | forged | signed

    @HOSTILE
    @given(
        data=st.data(),
        grant=st.sampled_from(["authorization_code", "refresh_token"]),
        with_client_id=st.booleans(),
        assertion_type=st.just(ASSERTION_TYPE) | hostile_text,
    )
    def test_token_with_hostile_assertions(
        self, data: st.DataObject, grant: str, with_client_id: bool, assertion_type: str
    ) -> None:
        pairs = [
            ("grant_type", grant),
            ("code", "c"),
            ("refresh_token", "r"),
            ("redirect_uri", REDIRECT_URI),
            ("code_verifier", "v" * 43),
            ("client_assertion_type", assertion_type),
            ("client_assertion", data.draw(self.assertion_strategy, label="assertion")),
        ]
        if with_client_id:
            pairs.append(("client_id", data.draw(st.just(self.chatgpt.client_id) | hostile_text, label="client_id")))
        response = self.post(Client(), "/o/token/", pairs)
        self.assertIn(response.status_code, {400, 401})

    @HOSTILE
    @given(
        members=st.fixed_dictionaries(
            {},
            optional={
                "token_endpoint_auth_method": st.just("private_key_jwt") | hostile_json,
                "jwks_uri": st.sampled_from(["https://127.0.0.1:1/jwks.json", "http://x/jwks", "https://"])
                | hostile_json,
                "jwks": st.fixed_dictionaries({"keys": st.lists(hostile_json, max_size=3)}) | hostile_json,
                "token_endpoint_auth_signing_alg": st.sampled_from(["RS256", "HS256", "none"]) | hostile_json,
            },
        )
    )
    def test_documents_with_hostile_key_members(self, members: dict[str, Any]) -> None:
        client_id = f"{self.documents.origin}/oauth/{uuid.uuid4()}/client.json"
        document = {"client_id": client_id, "redirect_uris": [REDIRECT_URI], **members}
        self.documents.documents[client_id.removeprefix(self.documents.origin)] = document
        _, challenge = pkce_pair()
        signed_in = Client()
        signed_in.force_login(self.alice)
        query = form_body(
            [
                ("response_type", "code"),
                ("client_id", client_id),
                ("redirect_uri", REDIRECT_URI),
                ("code_challenge", challenge),
                ("code_challenge_method", "S256"),
            ]
        ).decode()
        with emitted_logs() as logs:
            page = signed_in.get("/o/authorize/?" + query)
        self.assertLess(page.status_code, 500, page.content[:300])
        self.assertEqual(logs.errors(), [])
        if page.status_code == 400:
            self.assertIn(b"maker should change", page.content)
        # Whatever the document said, an assertion at the token endpoint is answered, never a 500.
        self.post(
            Client(),
            "/o/token/",
            [
                ("grant_type", "authorization_code"),
                ("code", "c"),
                ("client_id", client_id),
                ("client_assertion_type", ASSERTION_TYPE),
                (
                    "client_assertion",
                    self.chatgpt.assertion("http://testserver/o/token/", iss=client_id, sub=client_id),
                ),
            ],
        )


ID_JAG_CLAIMS = [*CLAIMS, "client_id", "resource", "scope", "email", "email_verified"]
IDP_KEY = rsa_key()


@override_settings(CODEX_CIMD_ALLOW_LOOPBACK=True)
class HostileIdJagsTest(HypothesisTestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.documents = DocumentsServer().__enter__()
        origin = cls.documents.origin
        cls.documents.documents = {
            "/.well-known/openid-configuration": {"issuer": origin, "jwks_uri": origin + "/jwks"},
            "/jwks": {"keys": [public_jwk(IDP_KEY, "idp-1", "RS256")]},
        }
        provider = {
            "id": "acme",
            "name": "Acme staff",
            "issuer": origin,
            "client_id": "codex-at-acme",
            "secret": "not-used-here",
            "domains": ["acme.test"],
            "id_jag": True,
        }
        # Entered before the class's own override (CODEX_CIMD_ALLOW_LOOPBACK, which Django lifts in a
        # class cleanup, after tearDownClass): cleanups run last in, first out, so this one is lifted
        # last, and the settings it replaced are what the next class sees.
        cls.enterClassContext(override_settings(**sso_settings(provider)))
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.documents.__exit__(None, None, None)

    @classmethod
    def setUpTestData(cls) -> None:
        Application = get_application_model()
        cls.agent = Application.objects.create(
            name="Acme agent",
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=REDIRECT_URI,
            client_secret="agent-secret",
        )

    def good_claims(self) -> dict[str, Any]:
        now = int(timezone.now().timestamp())
        return {
            "iss": self.documents.origin,
            "sub": "someone-at-acme",
            "aud": settings.CODEX_ISSUER_URL,
            "resource": settings.CODEX_RESOURCE_URL,
            "client_id": self.agent.client_id,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "exp": now + 300,
            "scope": "notes:read",
            "email": "someone@acme.test",
        }

    @HOSTILE
    @given(
        header=st.fixed_dictionaries(
            {"alg": st.just("RS256") | hostile_json},
            optional={"kid": st.just("idp-1") | hostile_json, "typ": st.just(id_jag.TYP) | hostile_json},
        ),
        changes=st.fixed_dictionaries({}, optional={name: hostile_json for name in ID_JAG_CLAIMS}),
    )
    def test_token_with_hostile_id_jags(self, header: dict[str, Any], changes: dict[str, Any]) -> None:
        claims = {**self.good_claims(), **changes}
        signing_input = f"{encoded_json(header)}.{encoded_json(claims)}"
        signature = b64url(jwt.get_algorithm_by_name("RS256").sign(signing_input.encode(), IDP_KEY))
        assertion = f"{signing_input}.{signature}"
        with emitted_logs() as logs:
            response = Client().post(
                "/o/token/",
                {
                    "grant_type": id_jag.GRANT_TYPE,
                    "assertion": assertion,
                    "client_id": self.agent.client_id,
                    "client_secret": "agent-secret",
                },
            )
        self.assertLess(response.status_code, 500, response.content[:300])
        self.assertEqual(logs.errors(), [])
        self.assertEqual(logs.tracebacks(), [])
        assert_consistent(self)
        if response.status_code != 200:
            # An oversized parameter is the request's fault, refused by the one parser first.
            expected = "invalid_request" if len(assertion) > MAX_JWT_CHARS else "invalid_grant"
            self.assertEqual(response.json()["error"], expected, response.content)
