"""The connected-applications pages: the clients holding a live token for the
signed-in person and their headless agents, revoking one (after asking), and making a
headless agent (``authserver.clients.agents``)."""

from collections import defaultdict
from typing import Any

from allauth.account.decorators import reauthentication_required
from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import Max, Min
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_http_methods
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings

from authserver.clients import agents
from authserver.clients.redirect_uris import destination
from authserver.core.revocation import access_revoke
from authserver.core.scopes import ALL_SCOPES
from authserver.core.tokens import OPERATOR_APPLICATION_NAME
from authserver.models import ClientUse, HeadlessAgent, OrganizationGrant
from authserver.people.account import sso_signed_in_again
from common.inputs import ascii_int
from notebook import selectors
from notebook.limits import MAX_BIGINT
from notebook.models import Codex
from notebook.selectors import WriterCounts


def _live_tokens(user: Any) -> tuple[Any, Any]:
    now = timezone.now()
    access = get_access_token_model().objects.filter(user=user, expires__gt=now, application__isnull=False)
    refresh = get_refresh_token_model().objects.filter(user=user, revoked__isnull=True, application__isnull=False)
    return access, refresh


@login_required
@require_http_methods(["GET"])
def authorized_clients(request: HttpRequest) -> HttpResponse:
    """The clients holding a live token for this person, with a revoke button each.

    Nine queries however many clients: live access-token scopes, clients with a live
    refresh token, the person's live headless agents, the clients themselves, when each got
    its first and its latest access and refresh token (two grouped queries), the person's
    codex, what each client wrote in it (created, last changed, wrote in at all;
    notebook.selectors.writer_counts), when each last called a tool (authserver.core.last_used),
    and which its organization granted (an ID-JAG's ``OrganizationGrant``).
    """
    access, refresh = _live_tokens(request.user)
    scopes_by_application: dict[int, set[str]] = defaultdict(set)
    for application_id, scope in access.values_list("application_id", "scope"):
        scopes_by_application[application_id].update(scope.split())
    # A live headless agent is listed whether or not it holds a token now: it can get one.
    agents_by_application = {agent.application_id: agent for agent in agents.live_agents(owner=request.user)}
    application_ids = (
        set(scopes_by_application) | set(refresh.values_list("application_id", flat=True)) | set(agents_by_application)
    )
    words = oauth2_settings.SCOPES
    applications = list(get_application_model().objects.filter(pk__in=application_ids).order_by("name", "pk"))
    issued = _tokens_issued(request.user, [application.pk for application in applications])
    codex = Codex.objects.filter(owner=request.user).first()  # looking never creates it
    counts = _writer_counts(codex, [application.client_id for application in applications])
    last_used = dict(
        ClientUse.objects.filter(
            user=request.user, application_id__in=[application.pk for application in applications]
        ).values_list("application_id", "last_used")
    )
    by_organization = dict(
        OrganizationGrant.objects.filter(
            user=request.user, application_id__in=[application.pk for application in applications]
        ).values_list("application_id", "issuer")
    )
    issuers = {provider["issuer"]: provider["name"] for provider in settings.CODEX_SSO_PROVIDERS}
    clients = []
    for application in applications:
        agent = agents_by_application.get(application.pk)
        scopes = sorted(scopes_by_application.get(application.pk, ()) or (agent.scope_list if agent else ()))
        clients.append(
            {
                "application": application,
                "agent": agent,
                "scopes": [words.get(scope, scope) for scope in scopes],
                "redirect_host": _returns_to(application),
                "wrote": counts.get(application.client_id, _NOTHING),
                "connected_on": issued.get(application.pk, (None, None))[0],
                "last_token": issued.get(application.pk, (None, None))[1],
                "last_used": last_used.get(application.pk),
                # "granted by your organization", through its IdP (named as sign-in names it).
                "organization": (
                    issuers.get(by_organization[application.pk], by_organization[application.pk])
                    if application.pk in by_organization
                    else None
                ),
            }
        )
    context = {
        "clients": clients,
        "revoked": _revoked_notice(request, codex),
        "agents_left": settings.CODEX_AGENTS_PER_PERSON - len(agents_by_application),
    }
    return render(request, "authserver/clients.html", context)


_NOTHING = WriterCounts(wrote=0, created=0, last_changed=0)


def _tokens_issued(user: Any, application_ids: list[int]) -> dict[int, tuple[Any, Any]]:
    """For each application: when this person's first token for it was issued (connected on)
    and the latest (a working client gets a new access token at least once per lifetime)."""
    spans: dict[int, tuple[Any, Any]] = {}
    for model in (get_access_token_model(), get_refresh_token_model()):
        rows = (
            model.objects.filter(user=user, application_id__in=application_ids)
            .values("application_id")
            .annotate(first=Min("created"), last=Max("created"))
            .values_list("application_id", "first", "last")
        )
        for application_id, first, last in rows:
            known = spans.get(application_id)
            spans[application_id] = (first, last) if known is None else (min(known[0], first), max(known[1], last))
    return spans


def _returns_to(application: Any) -> str:
    """Where approving this application sends the person back to (a minted token goes nowhere)."""
    if application.redirect_uris:
        # Its first redirect URI's web host, or the application on the person's computer it opens.
        return destination(application.redirect_uris.split()[0]).label
    if (
        application.authorization_grant_type == application.GRANT_CLIENT_CREDENTIALS
        and application.name != OPERATOR_APPLICATION_NAME
    ):
        return "none: a headless agent"
    return "none: minted on the command line" if application.name == OPERATOR_APPLICATION_NAME else "none"


def _writer_counts(codex: Codex | None, client_ids: list[str]) -> dict[str, WriterCounts]:
    """What each application wrote in this person's codex (one grouped query; none without a codex)."""
    if codex is None or not client_ids:
        return {}
    return selectors.writer_counts(codex=codex, client_ids=client_ids)


def _revoked_notice(request: HttpRequest, codex: Codex | None) -> dict[str, Any] | None:
    """After a revoke: which application, and how many notes it wrote, to review (never deleted)."""
    pk = ascii_int(request.GET.get("revoked"), max_value=MAX_BIGINT)
    if pk is None:
        return None
    client_id = get_application_model().objects.filter(pk=pk).values_list("client_id", flat=True).first()
    if client_id is None:
        return None
    wrote = _writer_counts(codex, [client_id]).get(client_id, _NOTHING).wrote
    # Named only as this person's own notes name it, so the notice tells nothing about an
    # application they never used.
    name = selectors.writer_name(codex=codex, client_id=client_id) if codex is not None and wrote else None
    return {"client_id": client_id, "name": name or client_id, "wrote": wrote}


@login_required
@require_http_methods(["GET", "POST"])
def revoke_client(request: HttpRequest, application_id: int) -> HttpResponse:
    """GET asks first, as deleting a note does; the POST (a CSRF-protected form) revokes every
    token this person gave the client, and, for their own headless agent, the agent itself
    (``authserver.clients.agents.agent_revoke``: its credentials stop working)."""
    application = get_object_or_404(get_application_model(), pk=application_id)
    # This person's own live headless agent: revoking it disables it for good.
    agent = HeadlessAgent.objects.filter(application=application, owner=request.user, revoked__isnull=True).first()
    if request.method == "GET":
        access, refresh = _live_tokens(request.user)
        connected = access.filter(application=application).exists() or refresh.filter(application=application).exists()
        if agent is None and not connected:
            # Only an application this person has connected is named to them.
            raise Http404("No such connected application")
        codex = Codex.objects.filter(owner=request.user).first()
        wrote = _writer_counts(codex, [application.client_id]).get(application.client_id, _NOTHING).wrote
        context = {
            "application_id": application.pk,
            "name": application.name or application.client_id,
            "wrote": wrote,
            "agent": agent,
        }
        return render(request, "authserver/revoke.html", context)
    if agent is not None:
        agents.agent_revoke(agent=agent, by="person")
    else:
        access_revoke(user=request.user, application=application, by="person")
    # Its notes stay: the page offers to review what it wrote rather than deleting anything.
    return redirect(f"{reverse('authserver:clients')}?revoked={application.pk}")


class NewAgentForm(forms.Form):
    name = forms.CharField(max_length=agents.NAME_MAX_CHARS, strip=True)
    scopes = forms.MultipleChoiceField(choices=[(scope, scope) for scope in ALL_SCOPES])
    authentication = forms.ChoiceField(
        choices=[(agents.PRIVATE_KEY_JWT, "its public key"), (agents.CLIENT_SECRET, "a secret")]
    )
    public_key = forms.CharField(required=False, strip=True, max_length=agents.PUBLIC_KEY_MAX_CHARS)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("authentication") == agents.PRIVATE_KEY_JWT and not data.get("public_key"):
            self.add_error(
                "public_key", "Paste the agent's public key (a JWKS or a PEM public key), or choose a secret."
            )
        return data


@login_required
@require_http_methods(["GET", "POST"])
@sso_signed_in_again
@reauthentication_required
def new_agent(request: HttpRequest) -> HttpResponse:
    """Make a headless agent (``authserver.clients.agents``), after the person signed in again as for
    their other sensitive actions: it can act on their notebook without them. A secret is shown
    on the answer to the POST and nowhere else (it is stored hashed); the page is never cached."""
    form = NewAgentForm(
        request.POST or None, initial={"scopes": list(ALL_SCOPES), "authentication": agents.PRIVATE_KEY_JWT}
    )
    context: dict[str, Any] = {
        "form": form,
        "scope_words": oauth2_settings.SCOPES,
        "limit": settings.CODEX_AGENTS_PER_PERSON,
        "live": agents.live_agents(owner=request.user).count(),
        "token_url": settings.CODEX_ISSUER_URL + "/token/",
        "issuer": settings.CODEX_ISSUER_URL,
        "resource": settings.CODEX_RESOURCE_URL,
    }
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            key = data["public_key"] if data["authentication"] == agents.PRIVATE_KEY_JWT else None
            try:
                created = agents.agent_create(
                    owner=request.user, name=data["name"], scopes=data["scopes"], public_key=key
                )
            except agents.AgentRefused as refused:
                form.add_error(None, str(refused))
            else:
                context["created"] = created
                words = oauth2_settings.SCOPES
                context["created_can"] = [words.get(scope, scope).lower() for scope in created.agent.scope_list]
        if "created" not in context:
            status = 400
    response = render(request, "authserver/new_agent.html", context, status=status)
    # The answer may hold the secret: no cache, no history copy to come back to.
    add_never_cache_headers(response)
    response["Cache-Control"] = "no-store, " + response["Cache-Control"]
    return response
