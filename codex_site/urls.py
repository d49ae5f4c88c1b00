import logging

from django.contrib import admin
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from oauth2_provider import urls as dot_urls
from oauth2_provider.views import OAuthServerMetadataView

from authserver import views as authserver_views
from authserver.registration import GuardedRegistrationManagementView
from authserver.token import CodexTokenView
from codex_site.middleware import unavailable_response
from codex_site.outage import UNAVAILABLE_ERRORS, log_database_unavailable

logger = logging.getLogger(__name__)

# Only the endpoints this server advertises. DOT's application and token management
# pages (/o/applications/, /o/authorized_tokens/) would let any signed-in person
# register clients for grants the metadata does not offer; the device flow and OIDC
# are off. People see and revoke their clients at /account/clients/ instead.
_SERVED = {"authorize", "token", "revoke-token", "introspect"}
OAUTH_ENDPOINTS = (
    dot_urls.metadata_urlpatterns
    + [pattern for pattern in dot_urls.base_urlpatterns if pattern.name in _SERVED]
    + dot_urls.dcr_urlpatterns
)


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, for load balancers: 200 or 503, small JSON either way."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except UNAVAILABLE_ERRORS as error:
        log_database_unavailable(logger, "health check", error)
        return unavailable_response({"status": "unavailable", "database": "unreachable"})
    response = JsonResponse({"status": "ok", "database": "ok"})
    response["Cache-Control"] = "no-store"
    return response


urlpatterns = [
    path("", authserver_views.home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("account/clients/", include("authserver.urls")),
    # RFC 8414 metadata for issuer <base>/o: the path-suffixed form MCP clients try first,
    # and the root form. OIDC_ISS_ENDPOINT makes both report the same issuer.
    path(".well-known/oauth-authorization-server/o", OAuthServerMetadataView.as_view()),
    path(".well-known/oauth-authorization-server", OAuthServerMetadataView.as_view()),
    # OIDC is off; answer its discovery URLs with a plain 404 rather than DOT's debug error.
    path(".well-known/openid-configuration/o", authserver_views.not_found),
    path("o/.well-known/openid-configuration", authserver_views.not_found),
    path("o/.well-known/openid-configuration/", authserver_views.not_found),
    # This server's versions of two DOT endpoints, resolved before DOT's own.
    path("o/authorize/", authserver_views.CodexAuthorizationView.as_view()),
    path("o/token/", CodexTokenView.as_view()),
    path("o/register/", authserver_views.RateLimitedRegistrationView.as_view()),
    path("o/register/<str:client_id>/", GuardedRegistrationManagementView.as_view()),
    path("o/", include((OAUTH_ENDPOINTS, "oauth2_provider"))),
]
