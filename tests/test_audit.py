"""The audit log (common.audit, contract 10): a tool call's access line names the person, the
application and the entry; every grant, revocation, deprovisioning and policy refusal writes a
line; and nothing secret or written by a person ever reaches one."""

import datetime as dt
import io
import json
import logging
from typing import Any

import httpx2
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client, SimpleTestCase, override_settings
from oauth2_provider.models import get_application_model

from authserver.clients import agents
from authserver.core.tokens import mint_access_token
from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.models import Organization
from codex_site.logs import CodexJsonFormatter
from common import access_log
from common.audit import audit
from tests.http_client import call_tool
from tests.live import LiveServerTestCase
from tests.oauth_helpers import Browser, authorization_url, exchange_code, pkce_pair, refresh, register_client

# Planted wherever a person, a client or an operator could put something the log must not hold.
MARKER = "PLANTED7c1e"
PASSWORD = f"pw-{MARKER}-word"
USER_SCHEMA = "urn:ietf:params:scim:schemas:core:2.0:User"
PATCH_SCHEMA = "urn:ietf:params:scim:api:messages:2.0:PatchOp"

EVENTS = {
    "token.granted",
    "token.revoked",
    "account.deleted",
    "person.provisioned",
    "person.updated",
    "person.deactivated",
    "person.reactivated",
    "person.deleted",
    "scim.credential_issued",
    "scim.credential_revoked",
    "policy.refused",
    "agent.created",
    "agent.revoked",
}


class CapturedLog:
    """The access and audit log as an operator ships it: JSON lines, through a real handler."""

    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(CodexJsonFormatter())
        self.logger = logging.getLogger("codex.access")

    def __enter__(self) -> "CapturedLog":
        self.level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self.handler)
        return self

    def __exit__(self, *exc: Any) -> None:
        access_log.flush()
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.level)

    @property
    def text(self) -> str:
        access_log.flush()
        return self.stream.getvalue()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.text.splitlines() if line.strip()]


class AuditFunctionTest(SimpleTestCase):
    def test_a_field_that_would_carry_a_secret_or_content_is_refused(self) -> None:
        for name in ("token", "access_token", "client_secret", "password", "credential", "content", "title", "code"):
            with self.subTest(name=name):
                with self.assertRaises(ValueError):
                    audit("token.granted", **{name: "x"})
        with self.assertRaises(ValueError):
            audit("token.granted", user=object())
        with self.assertRaises(ValueError):
            audit("Not An Event")

    def test_ids_counts_and_codes_are_written_and_long_texts_are_cut(self) -> None:
        with self.assertLogs("codex.access.audit", "INFO") as logs:
            audit("policy.refused", policy="client_hosts", client_id="c" * 1000, access_token_id=3, scopes=["a", "b"])
        record = logs.records[0]
        self.assertEqual((record.event, record.policy, record.access_token_id), ("policy.refused", "client_hosts", 3))
        self.assertEqual(len(record.client_id), 256)
        self.assertIn("audit policy.refused: policy=client_hosts", record.getMessage())


class AuditTrailTest(LiveServerTestCase):
    """Every kind of line, made through the real surfaces, with markers planted in everything
    a line must not carry."""

    def test_every_event_writes_its_line_and_no_line_carries_a_secret_or_content(self) -> None:
        secrets: list[str] = [MARKER, PASSWORD]
        base = self.live.base_url
        person = get_user_model().objects.create_user(f"alice-{MARKER.lower()}", password=PASSWORD)
        with CapturedLog() as log:
            # A grant by consent (authorization code with PKCE), then by refresh.
            client_id = register_client(base, client_name=f"Agent {MARKER}").json()["client_id"]
            verifier, challenge = pkce_pair()
            browser = Browser(base, person.username, PASSWORD)
            self.addCleanup(browser.close)
            url = authorization_url(
                base, client_id, code_challenge=challenge, code_challenge_method="S256", scope="notes:read notes:write"
            )
            code = browser.authorize(url)["code"]
            secrets.append(code)
            tokens = exchange_code(base, client_id, code, verifier).json()
            refreshed = refresh(base, client_id, tokens["refresh_token"]).json()
            secrets += [tokens["access_token"], tokens["refresh_token"], refreshed["access_token"]]
            access = refreshed["access_token"]
            # Tool calls with content, a title, tags, a query and a request id planted.
            entry = {"content": f"note {MARKER}", "title": f"title {MARKER}", "tags": [f"tag-{MARKER}"]}
            saved = call_tool(self.mcp_url, access, "field_notes_save", {"requestId": f"r-{MARKER}", "entry": entry})
            self.assertEqual(saved.status_code, 200, saved.text)
            entry_id = json.loads(saved.json()["result"]["content"][0]["text"])["entry"]["id"]
            call_tool(self.mcp_url, access, "field_notes_get", {"id": entry_id})
            call_tool(self.mcp_url, access, "field_notes_search", {"query": MARKER})
            call_tool(
                self.mcp_url, access, "field_notes_update", {"id": entry_id, "expectedRevision": 1, "entry": entry}
            )
            # The client revokes its own token at the revocation endpoint (RFC 7009).
            httpx2.post(base + "/o/revoke_token/", data={"token": access, "client_id": client_id})
            # An operator's token, revoked by the person on their page, then by the operator.
            secrets.append(mint_access_token(user=person, scopes=["notes:read"], lifetime=dt.timedelta(hours=1)))
            page = Client()
            page.force_login(person)
            application = get_application_model().objects.get(client_id=client_id)
            page.post(f"/account/clients/{application.pk}/revoke/")
            call_command("revoke_tokens", person.username, stdout=io.StringIO())
            # A headless agent named with the marker: made, given a token, revoked.
            agent = agents.agent_create(owner=person, name=f"Agent {MARKER}", scopes=["notes:read"])
            secrets.append(agent.secret)
            granted = httpx2.post(
                f"{base}/o/token/", data={"grant_type": "client_credentials"}, auth=(agent.client_id, agent.secret)
            )
            self.assertEqual(granted.status_code, 200, granted.text)
            secrets.append(granted.json()["access_token"])
            agents.agent_revoke(agent=agent.agent)
            # SCIM: the credential, a person provisioned, changed, deactivated, reactivated, deleted.
            organization = Organization.objects.create(name="acme", domains=["acme.example"])
            credential = credentials.issue(organization=organization)
            secrets.append(credential)
            scim = httpx2.Client(base_url=f"{base}/scim/v2", headers={"Authorization": f"Bearer {credential}"})
            self.addCleanup(scim.close)
            body = {
                "schemas": [USER_SCHEMA],
                "userName": "bjensen",
                "displayName": f"Barbara {MARKER}",
                "emails": [{"value": "bjensen@acme.example", "primary": True}],
            }
            created = scim.post("/Users", json=body).json()
            provisioned = get_user_model().objects.get(username="bjensen")
            secrets.append(mint_access_token(user=provisioned, scopes=["notes:read"], lifetime=dt.timedelta(hours=1)))
            for operations in (
                [{"op": "replace", "path": "displayName", "value": f"Babs {MARKER}"}],
                [{"op": "replace", "path": "active", "value": False}],
                [{"op": "replace", "path": "active", "value": True}],
            ):
                scim.patch(f"/Users/{created['id']}", json={"schemas": [PATCH_SCHEMA], "Operations": operations})
            scim.delete(f"/Users/{created['id']}")
            credentials.revoke(organization=organization)
            # A policy refusal: registration turned off by the operator (authserver.core.policy).
            with override_settings(CODEX_DCR_ENABLED=False):
                refused = register_client(base, client_name=f"Agent {MARKER}")
            self.assertEqual(refused.status_code, 403)

        records = log.records()
        text = log.text
        for secret in secrets:
            with self.subTest(secret=secret[:12]):
                self.assertNotIn(secret, text)
        events = {record.get("event") for record in records}
        self.assertEqual(EVENTS - events, set(), "an event wrote no line")
        calls = [record for record in records if record.get("tool")]
        self.assertEqual(
            [call["tool"] for call in calls],
            ["field_notes_save", "field_notes_get", "field_notes_search", "field_notes_update"],
        )
        for call in calls:
            self.assertEqual((call["user_id"], call["client_id"]), (person.pk, client_id))
        self.assertEqual([call["entry_id"] for call in calls], [entry_id, entry_id, None, entry_id])
        grants = [record for record in records if record.get("event") == "token.granted"]
        self.assertEqual(
            [grant["grant_type"] for grant in grants],
            ["authorization_code", "refresh_token", "mint_token", "client_credentials", "mint_token"],
        )
        revoked = {record["by"] for record in records if record.get("event") == "token.revoked"}
        self.assertEqual(revoked, {"client", "person", "operator", "deprovisioning", "account_deletion"})
        for record in records:
            if record.get("event"):
                print(json.dumps(record))
