"""One revocation, whichever door ends access: the same person with the same tokens of every
kind and a headless agent, run through each path that revokes, leaves the same rows behind (by the
scope the path ends: a person shut out, with her agents; a person's access; their access for one
application; or what one authorization code issued), and writes one ``token.revoked`` line naming
who revoked for each scope it ends (her access, and each headless agent it ends), with an
``agent.revoked`` line for each such agent."""

import datetime as dt
import hashlib
import io
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.test import Client, TestCase
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from authserver.clients import agents
from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.models import Organization, ProvisionedPerson
from authserver.models import CodeRedemption, HeadlessAgent, OrganizationGrant
from authserver.people import leaving
from tests.base import authorization_code

AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
Grant = get_grant_model()
IDToken = get_id_token_model()

SHUT_OUT = "the person shut out: her access and her headless agents"
PERSON, APPLICATION, CODE = "the person's access", "her access for one application", "what one code issued"


@dataclass(frozen=True)
class Path:
    name: str
    slug: str
    scope: str
    by: str
    agent: bool  # whether the application revoked is her headless agent's
    run: Callable[["RevocationPathsTest"], Any]


def connected_applications(test: "RevocationPathsTest") -> None:
    page = Client()
    page.force_login(test.alice)
    test.assertEqual(page.post(f"/account/clients/{test.target.pk}/revoke/").status_code, 302)


def admin_revokes_the_agent(test: "RevocationPathsTest") -> None:
    action = {"action": "revoke_agents", "_selected_action": [test.agent.pk]}
    test.assertEqual(test.operator_page().post("/admin/authserver/headlessagent/", action).status_code, 302)


def revoke_tokens_command(test: "RevocationPathsTest") -> None:
    call_command("revoke_tokens", "alice", stdout=io.StringIO())


def admin_active_checkbox(test: "RevocationPathsTest") -> None:
    joined = timezone.localtime(test.alice.date_joined)
    form = {
        "username": "alice",
        "first_name": "",
        "last_name": "",
        "email": "",
        # is_active left out: the checkbox unticked
        "date_joined_0": joined.strftime("%Y-%m-%d"),
        "date_joined_1": joined.strftime("%H:%M:%S"),
        "last_login_0": "",
        "last_login_1": "",
        "_save": "Save",
    }
    answer = test.operator_page().post(f"/admin/auth/user/{test.alice.pk}/change/", form)
    test.assertEqual(answer.status_code, 302, answer.content[:2000])


def saved_inactive(test: "RevocationPathsTest") -> None:
    test.alice.is_active = False
    test.alice.save()


def scim_deprovisioning(test: "RevocationPathsTest") -> None:
    organization = Organization.objects.create(name="acme", domains=["*"])
    person = ProvisionedPerson.objects.create(
        user=test.alice,
        organization=organization,
        user_name_key="alice",
        created_at=timezone.now(),
        modified_at=timezone.now(),
    )
    body = {
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{"op": "replace", "path": "active", "value": False}],
    }
    answer = Client().patch(
        f"/scim/v2/Users/{person.scim_id}",
        body,
        content_type="application/scim+json",
        HTTP_AUTHORIZATION=f"Bearer {credentials.issue(organization=organization)}",
    )
    test.assertIn(answer.status_code, (200, 204), answer.content)


def account_deletion(test: "RevocationPathsTest") -> None:
    leaving.account_delete(user=test.alice, by="person")


def code_replay(test: "RevocationPathsTest") -> None:
    answer = Client().post(
        "/o/token/",
        {
            "grant_type": "authorization_code",
            "code": test.redeemed_code,
            "code_verifier": "v" * 43,
            "redirect_uri": "http://127.0.0.1:9/callback",
            "client_id": test.target.client_id,
        },
    )
    test.assertEqual((answer.status_code, answer.json()["error"]), (400, "invalid_grant"))


PATHS = (
    Path("Connected applications", "connected_applications", APPLICATION, "person", False, connected_applications),
    Path(
        "Connected applications, her headless agent",
        "connected_applications_for_her_agent",
        APPLICATION,
        "person",
        True,
        connected_applications,
    ),
    Path(
        "the admin revoking her headless agent",
        "the_admin_revoking_her_agent",
        APPLICATION,
        "operator",
        True,
        admin_revokes_the_agent,
    ),
    Path("manage.py revoke_tokens", "revoke_tokens", PERSON, "operator", False, revoke_tokens_command),
    Path(
        "the admin's active checkbox",
        "the_admins_active_checkbox",
        SHUT_OUT,
        "deactivation",
        False,
        admin_active_checkbox,
    ),
    Path("user.save() with is_active off", "saving_her_inactive", SHUT_OUT, "deactivation", False, saved_inactive),
    Path("SCIM deprovisioning", "scim_deprovisioning", SHUT_OUT, "deprovisioning", False, scim_deprovisioning),
    Path("deleting the account", "deleting_her_account", SHUT_OUT, "account_deletion", False, account_deletion),
    Path("a replayed authorization code", "a_replayed_code", CODE, "code_replay", False, code_replay),
)


class RevocationPathsTest(TestCase):
    """Alice holds tokens of every kind for two applications (``target``, the one an
    application-wide path revokes, and ``other``), and Bob for ``other``; both are signed in. Each
    has a headless agent holding a token (Alice's is ``target`` on the agent paths)."""

    def setUp(self) -> None:
        User = get_user_model()
        self.alice = User.objects.create_user("alice", password="alice-password")
        self.bob = User.objects.create_user("bob", password="bob-password")
        Application = get_application_model()
        self.other = Application.objects.create(
            name="other",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:9/callback",
        )

    def operator_page(self) -> Client:
        page = Client()
        page.force_login(get_user_model().objects.create_superuser("operator", password="x"))
        return page

    def give_everything(self, *, agent: bool) -> None:
        Application = get_application_model()
        self.agent = agents.agent_create(owner=self.alice, name="nightly", scopes=["notes:read"]).agent
        self.bobs_agent = agents.agent_create(owner=self.bob, name="his", scopes=["notes:read"]).agent
        self.agent_token(self.bob, self.bobs_agent)
        if agent:
            self.target = self.agent.application
        else:
            self.agent_token(self.alice, self.agent)
            self.target = Application.objects.create(
                name="target",
                client_type=Application.CLIENT_PUBLIC,
                authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
                redirect_uris="http://127.0.0.1:9/callback",
            )
        for user, application in ((self.alice, self.target), (self.alice, self.other), (self.bob, self.other)):
            family = self.hold_everything(user, application)
            if (user, application) == (self.alice, self.target):
                self.target_family = family
        for user in (self.alice, self.bob):
            Client().force_login(user)
        self.record_the_targets_code()

    @staticmethod
    def agent_token(user: Any, agent: Any) -> None:
        """What a headless agent holds: an access token, as client credentials issue one."""
        AccessToken.objects.create(
            user=user,
            application=agent.application,
            token=f"agent {agent.name}",
            expires=timezone.now() + dt.timedelta(hours=1),
            scope="notes:read",
        )

    def hold_everything(self, user: Any, application: Any) -> uuid.UUID:
        """A pair rotated once (a revoked refresh token, the live pair it was exchanged for), an
        unused authorization code, an ID token and an organization's grant."""
        now = timezone.now()
        family = uuid.uuid4()
        name = f"{user.username}/{application.name}"
        rotated = RefreshToken.objects.create(
            user=user, application=application, token=f"rotated {name}", token_family=family, revoked=now
        )
        access = AccessToken.objects.create(
            user=user,
            application=application,
            token=f"access {name}",
            source_refresh_token=rotated,
            expires=now + dt.timedelta(hours=1),
            scope="notes:read",
        )
        RefreshToken.objects.create(
            user=user, application=application, token=f"refresh {name}", token_family=family, access_token=access
        )
        authorization_code(user, application)
        IDToken.objects.create(user=user, application=application, expires=now + dt.timedelta(hours=1))
        OrganizationGrant.objects.create(
            application=application, user=user, issuer="https://idp.example", granted_at=now
        )
        return family

    def record_the_targets_code(self) -> None:
        """The code that issued Alice's pair for ``target`` was redeemed a moment ago (kept as
        ``exchange.code_redeemed`` keeps it: a SHA-256 of the code)."""
        self.redeemed_code = "redeemed-code-of-alice"
        first_access = AccessToken.objects.create(
            user=self.alice, application=self.target, token="deleted at rotation", expires=timezone.now()
        )
        first_access_id = first_access.pk
        first_access.delete()
        CodeRedemption.objects.create(
            key=hashlib.sha256(self.redeemed_code.encode()).hexdigest(),
            application=self.target,
            user=self.alice,
            access_token_id=first_access_id,
            token_family=self.target_family,
            expires_at=timezone.now() + dt.timedelta(minutes=5),
        )

    def rows(self) -> set[tuple[str, ...]]:
        """What is left, by kind, person and application (``target``, ``other``, or a headless
        agent's: ``her agent`` when it is not ``target``, ``his agent``)."""
        names = {self.agent.application_id: "her agent", self.bobs_agent.application_id: "his agent"}
        names.update({self.target.pk: "target", self.other.pk: "other"})
        people = {self.alice.pk: "alice", self.bob.pk: "bob"}
        left: set[tuple[str, ...]] = set()
        # A live agent can still authenticate (a revoked one has neither secret nor keys left).
        for owner_id, application_id in HeadlessAgent.objects.filter(revoked__isnull=True).values_list(
            "owner_id", "application_id"
        ):
            left.add(("live agent", people[owner_id], names[application_id]))
        for kind, model in (("access token", AccessToken), ("code", Grant), ("ID token", IDToken)):
            for user_id, application_id in model.objects.values_list("user_id", "application_id"):
                left.add((kind, people[user_id], names[application_id]))
        for user_id, application_id, revoked in RefreshToken.objects.values_list(
            "user_id", "application_id", "revoked"
        ):
            kind = "refresh token" if revoked is None else "rotated refresh token"
            left.add((kind, people[user_id], names[application_id]))
        for user_id, application_id in OrganizationGrant.objects.values_list("user_id", "application_id"):
            left.add(("organization grant", people[user_id], names[application_id]))
        for session in Session.objects.all():
            signed_in = int(session.get_decoded()["_auth_user_id"])
            if signed_in in people:  # not the operator's, who revokes in the admin
                left.add(("session", people[signed_in]))
        return left

    @staticmethod
    def expected(before: set[tuple[str, ...]], scope: str) -> set[tuple[str, ...]]:
        if scope == SHUT_OUT:
            return {row for row in before if row[1] != "alice"}
        if scope == PERSON:
            return {row for row in before if row[1] != "alice" or row[0] == "live agent"}
        if scope == APPLICATION:
            return {row for row in before if row[1:] != ("alice", "target")}
        issued = {"access token", "refresh token", "rotated refresh token"}
        return {row for row in before if not (row[0] in issued and row[1:] == ("alice", "target"))}

    def check(self, path: Path) -> None:
        self.give_everything(agent=path.agent)
        before = self.rows()
        # 20 of the two applications, and the agents: two live, each with its token unless it is target.
        self.assertEqual(len(before), 23 if path.agent else 24)
        with self.assertLogs("codex.access.audit", "INFO") as logs, self.captureOnCommitCallbacks(execute=True):
            path.run(self)
        self.assertEqual(self.rows(), self.expected(before, path.scope))
        her_agent = self.agent.application.client_id
        ended_agent = path.scope == SHUT_OUT or path.agent
        scopes = {
            SHUT_OUT: [her_agent, None],
            PERSON: [None],
            APPLICATION: [self.target.client_id],
            CODE: [self.target.client_id],
        }[path.scope]
        revoked = [(line.by, line.user_id, line.client_id) for line in logs.records if line.event == "token.revoked"]
        self.assertEqual(revoked, [(path.by, self.alice.pk, client_id) for client_id in scopes])
        agents_ended = [
            (line.by, line.user_id, line.client_id) for line in logs.records if line.event == "agent.revoked"
        ]
        self.assertEqual(agents_ended, [(path.by, self.alice.pk, her_agent)] if ended_agent else [])


def _check(path: Path) -> Callable[[RevocationPathsTest], None]:
    def test(self: RevocationPathsTest) -> None:
        self.check(path)

    test.__name__ = f"test_{path.slug}_leaves_what_its_scope_leaves_with_its_audit_lines"
    test.__doc__ = f"{path.name}: {path.scope}"
    return test


for _path in PATHS:
    setattr(RevocationPathsTest, _check(_path).__name__, _check(_path))
