"""SCIM against a live server over real HTTP: a deprovisioned person's next tool call is refused,
and the third-party conformance checker ``scim2-tester`` finds no failure that applies."""

from pathlib import Path
from typing import Any

import httpx2
import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from scim2_client.engines.httpx2 import SyncSCIMClient
from scim2_tester import Status, check_server

from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.models import Organization
from tests.http_client import call_tool
from tests.live import LiveServerTestCase

USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
BASELINE = Path(settings.BASE_DIR) / "tests" / "clients" / "scim-not-applicable.yaml"
PASSING = {Status.SUCCESS, Status.COMPLIANT, Status.ACCEPTABLE}


class ScimLiveTestCase(LiveServerTestCase):
    domains = ["acme.example"]

    def setUp(self) -> None:
        self.organization = Organization.objects.create(name="acme", domains=self.domains)
        self.credential = credentials.issue(organization=self.organization)
        self.scim = httpx2.Client(
            base_url=f"{self.live.base_url}/scim/v2",
            headers={"Authorization": f"Bearer {self.credential}", "Content-Type": "application/scim+json"},
            timeout=30,
        )
        self.addCleanup(self.scim.close)


class DeprovisioningOverHttpTest(ScimLiveTestCase):
    def provisioned(self) -> tuple[dict[str, Any], Any, str]:
        body = {
            "schemas": [USER_SCHEMA],
            "userName": "bjensen",
            "emails": [{"value": "b@acme.example", "primary": True}],
        }
        created = self.scim.post("/Users", json=body)
        self.assertEqual(created.status_code, 201, created.text)
        user = get_user_model().objects.get(username="bjensen")
        token = self.token_for(user)
        # Two writes: the second rides on the grant the first check left held (PostgreSQL's
        # fast path), which the next call after deprovisioning must not be let through on.
        for request_id in ("first", "second"):
            saved = call_tool(
                self.mcp_url, token, "field_notes_save", {"requestId": request_id, "entry": {"content": "a note"}}
            )
            self.assertEqual(saved.status_code, 200, saved.text)
            self.assertNotIn('"isError":true', saved.text.replace(" ", ""))
        return created.json(), user, token

    def assertRefused(self, token: str) -> None:
        # The very next calls, with no wait: the database is asked on every call.
        for name, arguments in (
            ("field_notes_save", {"requestId": "third", "entry": {"content": "after"}}),
            ("field_notes_search", {}),
        ):
            with self.subTest(tool=name):
                refused = call_tool(self.mcp_url, token, name, arguments)
                self.assertEqual(refused.status_code, 401, refused.text)
                self.assertIn('error="invalid_token"', refused.headers["WWW-Authenticate"])

    def test_a_patch_active_false_makes_the_next_tool_call_401(self) -> None:
        created, _user, token = self.provisioned()
        patch = {"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "path": "active", "value": False}]}
        response = self.scim.patch(f"/Users/{created['id']}", json=patch)
        self.assertIn(response.status_code, (200, 204), response.text)
        self.assertRefused(token)

    def test_a_put_active_false_makes_the_next_tool_call_401(self) -> None:
        created, _user, token = self.provisioned()
        replacement = {**{key: created[key] for key in ("schemas", "userName", "emails")}, "active": False}
        response = self.scim.put(f"/Users/{created['id']}", json=replacement)
        self.assertEqual(response.status_code, 200, response.text)
        self.assertRefused(token)

    def test_a_delete_makes_the_next_tool_call_401(self) -> None:
        created, _user, token = self.provisioned()
        self.assertEqual(self.scim.delete(f"/Users/{created['id']}").status_code, 204)
        self.assertRefused(token)


def baseline() -> dict[str, str]:
    """The checks that cannot apply, each with its reason (``tests/clients/scim-not-applicable.yaml``)."""
    return {entry["check"]: entry["reason"] for entry in yaml.safe_load(BASELINE.read_text())["not_applicable"]}


class ScimTesterConformanceTest(ScimLiveTestCase):
    domains = ["*"]  # scim2-tester makes up its addresses

    def test_every_check_passes_or_is_listed_with_its_reason(self) -> None:
        client = SyncSCIMClient(self.scim)
        results = check_server(client)
        self.assertGreater(len(results), 10)
        listed = baseline()
        failed, stale, seen = [], [], set()
        for result in results:
            name = f"{result.resource_type or '-'}:{result.title}"
            seen.add(name)
            if result.status in PASSING or (result.status == Status.SKIPPED and name in listed):
                if name in listed and result.status in PASSING:
                    stale.append(name)
                continue
            if name not in listed:
                failed.append(f"{name} {result.status.name}: {result.reason}")
        self.assertEqual(failed, [], "scim2-tester found failures not in the baseline")
        self.assertEqual(stale, [], "these checks pass now: remove them from the baseline")
        self.assertEqual(sorted(set(listed) - seen), [], "the baseline names checks scim2-tester no longer makes")
        summary = {status.name: sum(1 for result in results if result.status == status) for status in Status}
        print(f"\nscim2-tester {summary}")
