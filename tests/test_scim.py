"""SCIM 2.0 provisioning at /scim/v2/ (authserver.enterprise.scim): the organization's credential, what it
reaches, the people it provisions, changes, deactivates and deletes, and hostile input."""

import json
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.test import TestCase
from oauth2_provider.models import get_access_token_model, get_refresh_token_model

from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.models import Organization, ProvisionedPerson
from authserver.enterprise.scim.schema import MAX_FILTER_CHARACTERS
from notebook import services
from notebook.models import Codex
from tests.base import connect_application

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
ERROR_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:Error"
PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
SCIM_JSON = "application/scim+json"


def person(user_name: str, email: str | None = None, **more: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"schemas": [USER_SCHEMA], "userName": user_name}
    if email is not None:
        body["emails"] = [{"value": email, "primary": True, "type": "work"}]
    body.update(more)
    return body


def active(value: bool) -> dict[str, Any]:
    return {"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "path": "active", "value": value}]}


class ScimTestCase(TestCase):
    @classmethod
    def setUpTestData(cls) -> None:
        cls.acme = Organization.objects.create(name="acme", domains=["acme.example"])
        cls.globex = Organization.objects.create(name="globex", domains=["globex.example"])
        cls.alice = get_user_model().objects.create_user("alice", email="alice@acme.example", password="pw-alice-1")

    def setUp(self) -> None:
        self.acme_credential = credentials.issue(organization=self.acme)
        self.globex_credential = credentials.issue(organization=self.globex)

    def scim(self, method: str, path: str, body: Any = None, *, credential: str | None = "acme", **headers: Any):
        if credential == "acme":
            credential = self.acme_credential
        elif credential == "globex":
            credential = self.globex_credential
        if credential is not None:
            headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {credential}")
        data = body if isinstance(body, (bytes, str)) else (json.dumps(body) if body is not None else "")
        content_type = headers.pop("content_type", SCIM_JSON)
        query_params = headers.pop("query_params", None)
        return self.client.generic(
            method, f"/scim/v2{path}", data, content_type=content_type, query_params=query_params, **headers
        )

    def provision(self, user_name: str = "bjensen", email: str = "bjensen@acme.example", **more: Any) -> dict[str, Any]:
        response = self.scim("POST", "/Users", person(user_name, email, **more))
        self.assertEqual(response.status_code, 201, response.content)
        return response.json()

    def assertScimError(self, response, status: int, scim_type: str | None = None) -> dict[str, Any]:
        self.assertEqual(response.status_code, status, response.content)
        self.assertTrue(response["Content-Type"].startswith(SCIM_JSON))
        body = response.json()
        self.assertEqual(body["schemas"], [ERROR_SCHEMA])
        self.assertEqual(int(body["status"]), status)
        if scim_type is not None:
            self.assertEqual(body.get("scimType"), scim_type)
        return body


class CredentialTest(ScimTestCase):
    def test_the_service_provider_config_needs_no_credential(self) -> None:
        response = self.scim("GET", "/ServiceProviderConfig", credential=None)
        self.assertEqual(response.status_code, 200)
        self.assertTrue(response.json()["patch"]["supported"])
        self.assertFalse(response.json()["bulk"]["supported"])

    def test_a_missing_credential_gets_scims_401(self) -> None:
        for path in ("/Users", "/Schemas", "/ResourceTypes", "/Users/anything"):
            with self.subTest(path=path):
                response = self.scim("GET", path, credential=None)
                self.assertScimError(response, 401)
                self.assertIn("Bearer", response["WWW-Authenticate"])

    def test_a_wrong_malformed_or_revoked_credential_gets_401(self) -> None:
        for header in (
            "Bearer codex_scim_wrong",
            "Basic YWNtZTpwYXNzd29yZA==",  # a username and password, not the credential
            f"Bearer {self.acme_credential}x",
            "Bearer " + "a" * 10_000,
            "Bearer",
            f"bearer{self.acme_credential}",
        ):
            with self.subTest(header=header[:40]):
                self.assertScimError(self.scim("GET", "/Users", credential=None, HTTP_AUTHORIZATION=header), 401)
        credentials.revoke(organization=self.acme)
        self.assertScimError(self.scim("GET", "/Users"), 401)

    def test_each_refused_credential_writes_one_audit_line_without_the_credential(self) -> None:
        wrong = f"Bearer {self.acme_credential}x"
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            self.scim("GET", "/Users", credential=None)
            self.scim("GET", "/Users", credential=None, HTTP_AUTHORIZATION=wrong)
            self.scim("GET", "/ServiceProviderConfig", credential=None)  # needs none: no line
            self.assertEqual(self.scim("GET", "/Users").status_code, 200)  # the right one: no line
        lines = [record.getMessage() for record in logs.records]
        self.assertEqual(lines, ["audit scim.refused: reason=missing", "audit scim.refused: reason=wrong"])
        self.assertNotIn(self.acme_credential, " ".join(lines))

    def test_only_the_checksum_is_kept_and_a_new_credential_replaces_the_old(self) -> None:
        self.acme.refresh_from_db()
        self.assertNotIn(
            self.acme_credential, json.dumps(list(Organization.objects.values()), default=str), "stored in clear"
        )
        self.assertEqual(self.acme.credential_checksum, credentials.checksum(self.acme_credential))
        old = self.acme_credential
        self.acme_credential = credentials.issue(organization=self.acme)
        self.assertScimError(self.scim("GET", "/Users", credential=old), 401)
        self.assertEqual(self.scim("GET", "/Users").status_code, 200)


class ProvisioningTest(ScimTestCase):
    def test_it_provisions_a_person_who_has_no_password(self) -> None:
        created = self.provision(name={"givenName": "Barbara", "familyName": "Jensen"}, externalId="00u1", active=True)
        self.assertEqual(created["userName"], "bjensen")
        self.assertTrue(created["active"])
        self.assertEqual(created["externalId"], "00u1")
        self.assertEqual(created["name"], {"givenName": "Barbara", "familyName": "Jensen"})
        user = get_user_model().objects.get(username="bjensen")
        self.assertFalse(user.has_usable_password())
        self.assertEqual((user.email, user.first_name, user.last_name), ("bjensen@acme.example", "Barbara", "Jensen"))
        self.assertEqual(ProvisionedPerson.objects.get(user=user).organization, self.acme)
        self.assertEqual(self.scim("GET", f"/Users/{created['id']}").json()["userName"], "bjensen")

    def test_an_address_outside_the_organizations_domains_is_refused_and_nothing_written(self) -> None:
        users = get_user_model().objects.count()
        self.assertScimError(self.scim("POST", "/Users", person("mallory", "m@globex.example")), 400, "invalidValue")
        self.assertEqual(get_user_model().objects.count(), users)

    def test_a_taken_username_is_a_conflict_whatever_its_case_and_no_account_is_adopted(self) -> None:
        for name in ("alice", "ALICE", "Alice"):
            with self.subTest(name=name):
                self.assertScimError(self.scim("POST", "/Users", person(name, "a@acme.example")), 409, "uniqueness")
        self.provision("bjensen")
        self.assertScimError(
            self.scim("POST", "/Users", person("BJensen", "b2@globex.example"), credential="globex"), 409, "uniqueness"
        )
        self.assertFalse(ProvisionedPerson.objects.filter(user=self.alice).exists())

    def test_an_organization_sees_only_the_people_it_provisioned(self) -> None:
        mine = self.provision()
        response = self.scim("GET", "/Users", credential="globex")
        self.assertEqual(response.json()["totalResults"], 0)
        for method, body in (("GET", None), ("PUT", person("x", "x@globex.example")), ("PATCH", active(False))):
            with self.subTest(method=method):
                self.assertScimError(self.scim(method, f"/Users/{mine['id']}", body, credential="globex"), 404)
        self.assertScimError(self.scim("DELETE", f"/Users/{mine['id']}", credential="globex"), 404)
        self.assertTrue(get_user_model().objects.get(username="bjensen").is_active)
        # An account no organization provisioned is nowhere to be found.
        listed = self.scim("GET", "/Users?filter=" + 'userName eq "alice"').json()
        self.assertEqual(listed["totalResults"], 0)

    def test_filters_find_by_username_case_insensitively_externalid_and_email(self) -> None:
        self.provision("bjensen", externalId="00u1")
        self.provision("jsmith", "jsmith@acme.example")
        for expression in (
            'userName eq "BJENSEN"',
            'externalId eq "00u1"',
            'emails.value eq "BJensen@acme.example"',
            'emails[value eq "bjensen@acme.example"]',
            'userName sw "bj" and active eq true',
            'not (userName eq "jsmith")',
        ):
            with self.subTest(expression=expression):
                found = self.scim("GET", "/Users", query_params={"filter": expression})
                self.assertEqual(found.status_code, 200, found.content)
                self.assertEqual([each["userName"] for each in found.json()["Resources"]], ["bjensen"])

    def test_a_replacement_and_an_etag_precondition(self) -> None:
        created = self.provision()
        version = self.scim("GET", f"/Users/{created['id']}")["ETag"]
        replaced = self.scim(
            "PUT", f"/Users/{created['id']}", person("barbara", "barbara@acme.example", displayName="Babs")
        )
        self.assertEqual(replaced.status_code, 200, replaced.content)
        self.assertEqual(replaced.json()["displayName"], "Babs")
        user = get_user_model().objects.get(provisioned__scim_id=created["id"])
        self.assertEqual((user.username, user.email), ("barbara", "barbara@acme.example"))
        stale = self.scim("PUT", f"/Users/{created['id']}", person("other"), HTTP_IF_MATCH=version)
        self.assertScimError(stale, 412)
        self.assertEqual(get_user_model().objects.get(pk=user.pk).username, "barbara")


class DeprovisioningTest(ScimTestCase):
    def provisioned_with_everything(self) -> tuple[dict[str, Any], Any]:
        created = self.provision()
        user = get_user_model().objects.get(username="bjensen")
        services.codex_for_user(user=user)
        connect_application(user, "desk")
        self.client.force_login(user)  # a session
        from oauth2_provider.models import get_application_model

        application = get_application_model().objects.get(name="desk")
        get_refresh_token_model().objects.create(user=user, application=application, token="refresh-of-bjensen")
        return created, user

    def sessions_of(self, user) -> int:
        return sum(1 for each in Session.objects.all() if each.get_decoded().get("_auth_user_id") == str(user.pk))

    def test_active_false_ends_tokens_and_sessions_at_once_and_active_true_brings_none_back(self) -> None:
        created, user = self.provisioned_with_everything()
        self.assertEqual(self.sessions_of(user), 1)
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            response = self.scim("PATCH", f"/Users/{created['id']}", active(False))
        self.assertIn(response.status_code, (200, 204), response.content)
        user.refresh_from_db()
        self.assertFalse(user.is_active)
        self.assertFalse(get_access_token_model().objects.filter(user=user).exists())
        self.assertFalse(get_refresh_token_model().objects.filter(user=user).exists())
        self.assertEqual(self.sessions_of(user), 0)
        events = [record.event for record in logs.records]
        self.assertIn("person.deactivated", events)
        revoked = next(record for record in logs.records if record.event == "token.revoked")
        self.assertEqual((revoked.by, revoked.user_id, revoked.access_tokens), ("deprovisioning", user.pk, 1))
        self.assertFalse(self.scim("GET", f"/Users/{created['id']}").json()["active"])

        self.assertIn(self.scim("PATCH", f"/Users/{created['id']}", active(True)).status_code, (200, 204))
        user.refresh_from_db()
        self.assertTrue(user.is_active)
        self.assertFalse(get_access_token_model().objects.filter(user=user).exists())

    def test_a_replacement_with_active_false_deprovisions_too(self) -> None:
        created, user = self.provisioned_with_everything()
        body = person("bjensen", "bjensen@acme.example", active=False)
        self.assertEqual(self.scim("PUT", f"/Users/{created['id']}", body).status_code, 200)
        self.assertFalse(get_access_token_model().objects.filter(user=user).exists())
        self.assertFalse(get_user_model().objects.get(pk=user.pk).is_active)

    def test_a_delete_follows_the_account_deletion(self) -> None:
        created, user = self.provisioned_with_everything()
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            self.assertEqual(self.scim("DELETE", f"/Users/{created['id']}").status_code, 204)
        self.assertFalse(get_user_model().objects.filter(pk=user.pk).exists())
        self.assertFalse(Codex.objects.filter(owner_id=user.pk).exists())
        self.assertFalse(ProvisionedPerson.objects.filter(scim_id=created["id"]).exists())
        self.assertEqual(self.sessions_of(user), 0)
        self.assertEqual(
            [record.event for record in logs.records if record.event in ("account.deleted", "person.deleted")],
            ["account.deleted", "person.deleted"],
        )
        self.assertScimError(self.scim("GET", f"/Users/{created['id']}"), 404)

    def test_an_operator_cannot_be_deprovisioned_even_if_provisioned_once(self) -> None:
        created = self.provision()
        get_user_model().objects.filter(username="bjensen").update(is_staff=True)
        self.assertScimError(self.scim("PATCH", f"/Users/{created['id']}", active(False)), 403)
        self.assertScimError(self.scim("DELETE", f"/Users/{created['id']}"), 403)
        self.assertTrue(get_user_model().objects.get(username="bjensen").is_active)


class HostileInputTest(ScimTestCase):
    def assertNothingWritten(self, response, status: int, scim_type: str | None = None) -> None:
        self.assertScimError(response, status, scim_type)
        self.assertEqual(ProvisionedPerson.objects.count(), 0)
        self.assertEqual(get_user_model().objects.count(), 1)

    def test_bodies_that_are_not_a_person_get_scim_errors(self) -> None:
        cases = {
            "not JSON": (b"{not json", SCIM_JSON, 400),
            "empty": (b"", SCIM_JSON, 400),
            "a list": (b"[]", SCIM_JSON, 400),
            "nested deep": (b'{"userName": ' + b"[" * 5000 + b"]" * 5000 + b"}", SCIM_JSON, 400),
            "invalid UTF-8": (b'{"userName": "\xff\xfe"}', SCIM_JSON, 400),
            "a form": (b"userName=x", "application/x-www-form-urlencoded", 415),
            "text": (b'{"userName": "x"}', "text/plain", 415),
            "an unknown attribute": (json.dumps(person("x", "x@acme.example", title="boss")).encode(), SCIM_JSON, 400),
            "a password": (json.dumps(person("x", "x@acme.example", password="hunter2")).encode(), SCIM_JSON, 400),
            "an unknown schema": (
                json.dumps({**person("x"), "schemas": [USER_SCHEMA, "urn:x:y"]}).encode(),
                SCIM_JSON,
                400,
            ),
            "a username of spaces": (json.dumps(person("a b c", "x@acme.example")).encode(), SCIM_JSON, 400),
            "a username too long": (json.dumps(person("a" * 151, "x@acme.example")).encode(), SCIM_JSON, 400),
            "no username": (json.dumps({"schemas": [USER_SCHEMA]}).encode(), SCIM_JSON, 400),
        }
        for case, (body, content_type, status) in cases.items():
            with self.subTest(case=case):
                self.assertNothingWritten(self.scim("POST", "/Users", body, content_type=content_type), status)

    def test_filters_that_are_too_large_or_unsupported_get_invalid_filter(self) -> None:
        self.provision()
        cases = {
            "too long": 'userName eq "' + "a" * MAX_FILTER_CHARACTERS + '"',
            "too many terms": " or ".join(f'userName eq "u{i}"' for i in range(40)),
            "an attribute not kept": 'title eq "boss"',
            "an ordering on a name": 'userName gt "a"',
            "a meta attribute": 'meta.lastModified gt "2011-05-13T04:42:34Z"',
            "not a filter": "userName eq",
            "a string for active": 'active eq "true"',
            "emails.type": 'emails[type eq "work"]',
        }
        for case, expression in cases.items():
            with self.subTest(case=case):
                response = self.scim("GET", "/Users", query_params={"filter": expression})
                self.assertScimError(response, 400, "invalidFilter")
                posted = self.scim(
                    "POST",
                    "/Users/.search",
                    {"schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "filter": expression},
                )
                self.assertScimError(posted, 400, "invalidFilter")

    def test_patches_that_cannot_apply_get_scim_errors_and_change_nothing(self) -> None:
        created = self.provision()
        cases = {
            "no operations": {"schemas": [PATCH_SCHEMA]},
            "an unknown op": {"schemas": [PATCH_SCHEMA], "Operations": [{"op": "move", "path": "active"}]},
            "an unknown path": {
                "schemas": [PATCH_SCHEMA],
                "Operations": [{"op": "replace", "path": "title", "value": "x"}],
            },
            "a wrong type": {
                "schemas": [PATCH_SCHEMA],
                "Operations": [{"op": "replace", "path": "active", "value": "maybe"}],
            },
            "a path that is not one": {
                "schemas": [PATCH_SCHEMA],
                "Operations": [{"op": "remove", "path": "emails[[["}],
            },
            "a foreign address": {
                "schemas": [PATCH_SCHEMA],
                "Operations": [{"op": "add", "path": "emails", "value": [{"value": "m@globex.example"}]}],
            },
        }
        for case, body in cases.items():
            with self.subTest(case=case):
                response = self.scim("PATCH", f"/Users/{created['id']}", body)
                self.assertEqual(response.status_code // 100, 4, response.content)
                self.assertScimError(response, response.status_code)
                self.assertEqual(ProvisionedPerson.objects.get(scim_id=created["id"]).version, 1)

    def test_deeply_nested_filters_and_paths_are_answered_without_a_server_error(self) -> None:
        created = self.provision()
        nested = "(" * 400 + 'userName eq "bjensen"' + ")" * 400  # within the filter's length
        found = self.scim("GET", "/Users", query_params={"filter": nested})
        self.assertEqual(found.json()["totalResults"], 1)
        deep_path = "emails[" + "(" * 5000 + 'value eq "x"' + ")" * 5000 + "]"
        body = {"schemas": [PATCH_SCHEMA], "Operations": [{"op": "remove", "path": deep_path}]}
        response = self.scim("PATCH", f"/Users/{created['id']}", body)
        self.assertLess(response.status_code, 500, response.content)
        self.assertEqual(ProvisionedPerson.objects.get(scim_id=created["id"]).version, 1)

    def test_unserved_endpoints_and_methods_get_scim_errors(self) -> None:
        for method, path, status in (
            ("GET", "/Groups", 404),
            ("POST", "/Bulk", 501),
            ("GET", "/Me", 501),
            ("GET", "/Nothing/here", 404),
            ("DELETE", "/Users", 405),
            ("GET", "/Users/not-a-uuid", 404),
            ("GET", "/Users/" + "9" * 5000, 404),
        ):
            with self.subTest(method=method, path=path[:30]):
                self.assertScimError(self.scim(method, path, {} if method == "POST" else None), status)

    def test_a_nul_character_is_refused_before_any_lookup(self) -> None:
        response = self.scim("POST", "/Users", person("x\u0000y", "x@acme.example"))
        self.assertEqual(response.status_code // 100, 4)
        self.assertEqual(ProvisionedPerson.objects.count(), 0)


class SingleSignOnLinkTest(ScimTestCase):
    """The first single sign-on of a provisioned person finds their account (authserver.enterprise.scim.links)."""

    def setUp(self) -> None:
        super().setUp()
        Organization.objects.filter(pk=self.acme.pk).update(provider_id="acme-idp")

    def test_a_provisioned_person_is_found_by_a_verified_address_through_their_organizations_provider(self) -> None:
        from authserver.enterprise.scim.links import provisioned_account

        self.provision("bjensen", "BJensen@acme.example")
        found = provisioned_account(provider_id="acme-idp", emails=["bjensen@ACME.example"])
        self.assertEqual(found, get_user_model().objects.get(username="bjensen"))
        # By userName too (an IdP whose userName is the address).
        self.provision("jsmith@acme.example", "other@acme.example")
        self.assertEqual(
            provisioned_account(provider_id="acme-idp", emails=["jsmith@acme.example"]).username, "jsmith@acme.example"
        )

    def test_no_other_provider_organization_account_or_operator_is_found(self) -> None:
        from allauth.socialaccount.models import SocialAccount

        from authserver.enterprise.scim.links import provisioned_account

        self.provision("bjensen", "bjensen@acme.example")
        self.assertIsNone(provisioned_account(provider_id="globex-idp", emails=["bjensen@acme.example"]))
        self.assertIsNone(provisioned_account(provider_id="acme-idp", emails=["alice@acme.example"]))  # not provisioned
        self.assertIsNone(provisioned_account(provider_id="acme-idp", emails=[]))
        user = get_user_model().objects.get(username="bjensen")
        SocialAccount.objects.create(user=user, provider="acme-idp", uid="another-subject")
        self.assertIsNone(provisioned_account(provider_id="acme-idp", emails=["bjensen@acme.example"]))
        SocialAccount.objects.all().delete()
        get_user_model().objects.filter(pk=user.pk).update(is_staff=True)
        self.assertIsNone(provisioned_account(provider_id="acme-idp", emails=["bjensen@acme.example"]))
