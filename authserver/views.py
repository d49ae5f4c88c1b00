"""The person-facing side of the authorization server: consent (DOT's view with
iss on every redirect and a rate limit on metadata-document fetches), dynamic
registration with a clear 429, and the list of clients a person has authorized."""

from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import get_access_token_model, get_application_model, get_refresh_token_model
from oauth2_provider.views import AuthorizationView
from oauth2_provider.views.dynamic_client_registration import DynamicClientRegistrationView

from authserver.ratelimit import allow, client_address
from authserver.registration import registration_body_problem
from mcp_endpoint.auth import revoke_tokens

SCOPE_WORDS = {"notes:read": "read your notes", "notes:write": "write your notes"}


def _too_many(message: str, retry_after: int) -> JsonResponse:
    response = JsonResponse({"error": "too_many_requests", "error_description": message}, status=429)
    response["Retry-After"] = str(retry_after)
    return response


def _with_iss(url: str) -> str:
    """RFC 9207: every authorization response names its issuer, errors included."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if parts.scheme in {"http", "https", ""} and not any(key == "iss" for key, _ in query):
        query.append(("iss", settings.CODEX_ISSUER_URL))
        return urlunsplit(parts._replace(query=urlencode(query)))
    return url


class CodexAuthorizationView(AuthorizationView):
    """DOT's authorization endpoint with this server's consent page."""

    template_name = "oauth2_provider/authorize.html"

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        client_id = request.GET.get("client_id", "")
        if is_cimd_client_id(client_id) and not get_application_model().objects.filter(client_id=client_id).exists():
            # This request would make the server fetch a metadata document: limit per address.
            ok, retry_after = allow(
                "cimd", client_address(request), limit=settings.CODEX_CIMD_RATE_LIMIT, window_seconds=600
            )
            if not ok:
                response = render(
                    request,
                    "authserver/rate_limited.html",
                    {"retry_after": retry_after, "what": "sign-ins with new applications"},
                    status=429,
                )
                response["Retry-After"] = str(retry_after)
                return response
        if request.method == "GET" and not request.user.is_authenticated:
            # Check the request before asking anyone to sign in (contract 8): a bad client
            # or redirect URI gets the error page (it must not redirect), a missing PKCE
            # challenge or a foreign resource goes back to the client with the error and
            # iss. A valid request continues to the sign-in page as before. (A new CIMD
            # client's document is fetched here, under the rate limit above.)
            try:
                self.validate_authorization_request(request)
            except OAuthToolkitError as error:
                return self.error_response(error, application=None)
        return super().dispatch(request, *args, **kwargs)

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        return super().redirect(_with_iss(redirect_to), application)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        redirect_uri = context.get("redirect_uri") or ""
        host = urlsplit(redirect_uri).hostname or redirect_uri
        context["redirect_host"] = host
        context["redirect_is_local"] = host in {"localhost", "127.0.0.1", "::1"}
        context["scope_words"] = [SCOPE_WORDS.get(scope, scope) for scope in context.get("scopes", [])]
        application = context.get("application")
        client_id = getattr(application, "client_id", "")
        context["client_home"] = urlsplit(client_id).hostname if is_cimd_client_id(client_id) else None
        return context


class RateLimitedRegistrationView(DynamicClientRegistrationView):
    """RFC 7591 registration, at most CODEX_DCR_RATE_LIMIT per client address per hour."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        ok, retry_after = allow(
            "dcr", client_address(request), limit=settings.CODEX_DCR_RATE_LIMIT, window_seconds=3600
        )
        if not ok:
            return _too_many(
                "Too many client registrations from this address; retry after the Retry-After interval.",
                retry_after,
            )
        if problem := registration_body_problem(request):
            return problem
        return super().post(request, *args, **kwargs)


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "authserver/home.html", {"mcp_url": settings.CODEX_RESOURCE_URL})


def _live_tokens(user: Any) -> tuple[Any, Any]:
    now = timezone.now()
    access = get_access_token_model().objects.filter(user=user, expires__gt=now, application__isnull=False)
    refresh = get_refresh_token_model().objects.filter(user=user, revoked__isnull=True, application__isnull=False)
    return access, refresh


@login_required
@require_http_methods(["GET"])
def authorized_clients(request: HttpRequest) -> HttpResponse:
    """The clients holding a live token for this person, with a revoke button each."""
    access, refresh = _live_tokens(request.user)
    application_ids = set(access.values_list("application_id", flat=True)) | set(
        refresh.values_list("application_id", flat=True)
    )
    clients = []
    for application in get_application_model().objects.filter(pk__in=application_ids).order_by("name", "pk"):
        tokens = access.filter(application=application)
        scopes = sorted({scope for token in tokens for scope in token.scope.split()})
        clients.append(
            {
                "application": application,
                "scopes": [SCOPE_WORDS.get(scope, scope) for scope in scopes],
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


def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    return JsonResponse({"error": "not_found"}, status=404)
