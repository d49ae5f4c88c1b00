"""The connected-applications pages: the clients holding a live token for the
signed-in person, and revoking one."""

from collections import defaultdict
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings

from authserver.tokens import revoke_tokens


def _live_tokens(user: Any) -> tuple[Any, Any]:
    now = timezone.now()
    access = get_access_token_model().objects.filter(user=user, expires__gt=now, application__isnull=False)
    refresh = get_refresh_token_model().objects.filter(user=user, revoked__isnull=True, application__isnull=False)
    return access, refresh


@login_required
@require_http_methods(["GET"])
def authorized_clients(request: HttpRequest) -> HttpResponse:
    """The clients holding a live token for this person, with a revoke button each.

    Three queries however many clients: live access-token scopes, clients with a live
    refresh token, and the clients themselves.
    """
    access, refresh = _live_tokens(request.user)
    scopes_by_application: dict[int, set[str]] = defaultdict(set)
    for application_id, scope in access.values_list("application_id", "scope"):
        scopes_by_application[application_id].update(scope.split())
    application_ids = set(scopes_by_application) | set(refresh.values_list("application_id", flat=True))
    words = oauth2_settings.SCOPES
    clients = []
    for application in get_application_model().objects.filter(pk__in=application_ids).order_by("name", "pk"):
        scopes = sorted(scopes_by_application.get(application.pk, ()))
        clients.append(
            {
                "application": application,
                "scopes": [words.get(scope, scope) for scope in scopes],
                "redirect_host": urlsplit(application.redirect_uris.split()[0]).hostname
                if application.redirect_uris
                else "",
            }
        )
    return render(request, "authserver/clients.html", {"clients": clients})


@login_required
@require_http_methods(["POST"])
def revoke_client(request: HttpRequest, application_id: int) -> HttpResponse:
    """Revoke every token this person gave the client (CSRF-protected form post)."""
    application = get_object_or_404(get_application_model(), pk=application_id)
    revoke_tokens(user=request.user, application=application)
    return redirect("authserver:clients")
