"""A person leaves: their account and everything of theirs is deleted (contract 9; the
account page's "Delete my account" and ``manage.py codex_deluser``).

In three steps, each its own transaction, so that the person is out at once and a run that
stops half-way can be run again (each step finds what the one before left):

1. Shut out: the account is deactivated, its headless agents are revoked
   (``authserver.clients.agents.agents_revoke``), and its access ends as every revocation ends
   it (``authserver.core.revocation.access_revoke``): tokens, codes, grants and sessions.
   The next tool call with any of their tokens gets 401 (the check reads the database on
   every call), no browser stays signed in, and no agent of theirs gets a token again.
2. Their codex goes, with its entries, revisions, tag and agent rows and request keys
   (``notebook.services.codex_delete``).
3. The rest: the OAuth applications that were registered only for them, their
   second-factor devices, single sign-on links and email addresses (allauth's tables), the
   admin's history about their account, their counters in the rate limits, and the
   account itself.

An application is "only theirs" when no one else holds (or held) a token or grant for it,
no one else's notes name it as their writer, it is not the command-line token's shared
application, and it was either registered by them (``Application.user``) or came from
dynamic registration or a metadata document (no owner) and they are the only person who
ever used it. An application several people use (a hosted client named by its metadata
document, a desktop client registered once and shared) stays for the others; a metadata
document's client is fetched again by its next user anyway.
"""

from dataclasses import dataclass, field
from typing import Any

from django.contrib.admin.models import LogEntry
from django.contrib.auth import get_user_model
from django.contrib.contenttypes.models import ContentType
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from authserver.clients import agents
from authserver.core.revocation import access_revoke
from authserver.core.tokens import OPERATOR_APPLICATION_NAME
from authserver.models import ClientKeys, ClientUse
from common.audit import audit
from notebook import services
from notebook.models import Codex, EntryRevision


@dataclass
class DeletionReport:
    username: str
    user_id: int
    entries: int = 0
    tokens: int = 0
    sessions: int = 0
    applications: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (
            f"{self.username} (id {self.user_id}): {self.entries} entries, {self.tokens} tokens and grants, "
            f"{self.sessions} sessions, {len(self.applications)} applications only theirs"
        )


def _token_models() -> list[Any]:
    return [
        get_access_token_model(),
        get_refresh_token_model(),
        get_id_token_model(),
        get_grant_model(),
    ]


def applications_only_theirs(*, user: Any) -> list[Any]:
    """The OAuth applications that go with this person (see the module's docstring)."""
    Application = get_application_model()
    used: set[int] = set()
    for model in _token_models():
        used.update(model.objects.filter(user=user).exclude(application=None).values_list("application_id", flat=True))
    used.update(ClientUse.objects.filter(user=user).values_list("application_id", flat=True))
    codex = Codex.objects.filter(owner=user).first()
    if codex is not None:
        used.update(
            EntryRevision.objects.filter(codex=codex)
            .exclude(writer_application=None)
            .values_list("writer_application_id", flat=True)
            .distinct()
        )
    candidates = Application.objects.filter(pk__in=used, user__isnull=True) | Application.objects.filter(user=user)
    candidates = candidates.exclude(name=OPERATOR_APPLICATION_NAME)
    theirs = []
    for application in candidates.distinct():
        shared = any(
            model.objects.filter(application=application).exclude(user=user).exclude(user=None).exists()
            for model in _token_models()
        )
        shared = shared or ClientUse.objects.filter(application=application).exclude(user=user).exists()
        other_notes = EntryRevision.objects.filter(writer_application=application)
        if codex is not None:
            other_notes = other_notes.exclude(codex=codex)
        if not shared and not other_notes.exists():
            theirs.append(application)
    return theirs


def what_goes(*, user: Any) -> dict[str, Any]:
    """What deleting this account removes, for the confirmation page."""
    codex = Codex.objects.filter(owner=user).first()
    return {
        "entries": codex.entries.count() if codex is not None else 0,
        "applications": [
            application.name or application.client_id for application in applications_only_theirs(user=user)
        ],
        "connected": connected_count(user=user),
    }


def connected_count(*, user: Any) -> int:
    """How many applications hold a live token for this person."""
    now = timezone.now()
    ids = set(
        get_access_token_model()
        .objects.filter(user=user, expires__gt=now)
        .exclude(application=None)
        .values_list("application_id", flat=True)
    )
    ids.update(
        get_refresh_token_model()
        .objects.filter(user=user, revoked__isnull=True)
        .exclude(application=None)
        .values_list("application_id", flat=True)
    )
    return len(ids)


@transaction.atomic
def shut_out(*, user: Any, by: str) -> tuple[int, int]:
    """Step 1 of leaving, also SCIM's deprovisioning (``authserver.enterprise.scim``): deactivate the
    account, revoke its headless agents (``agents_revoke``) and end all of its access
    (``access_revoke``: tokens, codes, grants and sessions), in one transaction; the audit lines
    say ``by`` whom (``revocation.REVOKED_BY``). Returns (tokens, codes and grants, sessions)
    deleted.

    The next tool call with any of their tokens gets 401: every request's token is checked
    against the database, and no process keeps a check for another request. The update takes the
    person's row lock first, as every issuance does (``tokens.person_hold``): a token being issued
    for them either is revoked here or is refused there."""
    # A bulk update sends no signal (authserver.signals would revoke a second time).
    get_user_model().objects.filter(pk=user.pk).update(is_active=False)
    agent_rows = agents.agents_revoke(owner=user, by=by)
    revoked = access_revoke(user=user, by=by)
    return agent_rows + revoked.rows, revoked.sessions


def _shut_out(user: Any, report: DeletionReport) -> None:
    report.tokens, report.sessions = shut_out(user=user, by="account_deletion")


@transaction.atomic
def _remove_the_rest(user: Any, applications: list[Any], report: DeletionReport) -> None:
    for application in applications:
        report.applications.append(application.client_id)
        ClientKeys.objects.filter(client_id=application.client_id).delete()
        application.delete()
    user_type = ContentType.objects.get_for_model(get_user_model())
    LogEntry.objects.filter(content_type=user_type, object_id=str(user.pk)).delete()
    _forget_rate_limits(user)
    get_user_model().objects.filter(pk=user.pk).delete()


def _forget_rate_limits(user: Any) -> None:
    """allauth's counters that name this account (per account and per user; the per-address
    ones are the address's, and expire within minutes)."""
    from allauth.core.internal import ratelimit as allauth_ratelimit

    from authserver.people.signin import attempts_key

    app = "allauth.account"
    actions = [("login_failed", attempts_key(user.get_username())), ("change_password", None), ("reauthenticate", None)]
    for action, key in actions:
        for rate in allauth_ratelimit.get_rates(app=app, action=action):
            if rate.per == "key" and key is not None:
                cache.delete(allauth_ratelimit.get_cache_key(None, app=app, action=action, rate=rate, key=key))
            elif rate.per == "user":
                cache.delete(allauth_ratelimit.get_cache_key(None, app=app, action=action, rate=rate, user=user))


def account_delete(*, user: Any, by: str) -> DeletionReport:
    """Delete this person's account and everything of theirs (see the module's docstring);
    ``by`` (``person``, ``operator`` or ``deprovisioning``) is for the audit line."""
    report = DeletionReport(username=user.get_username(), user_id=user.pk)
    applications = applications_only_theirs(user=user)  # before their tokens, which say who used what
    _shut_out(user, report)
    codex = Codex.objects.filter(owner=user).first()
    if codex is not None:
        report.entries = services.codex_delete(codex=codex)
    _remove_the_rest(user, applications, report)
    audit("account.deleted", user_id=report.user_id, by=by, entries=report.entries, sessions=report.sessions)
    return report
