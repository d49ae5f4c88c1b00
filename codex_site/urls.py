from django.contrib import admin
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.urls import include, path
from oauth2_provider.views import OAuthServerMetadataView

from authserver import views as authserver_views


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, for load balancers and the README."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("", authserver_views.home, name="home"),
    path("healthz", healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("account/clients/", include("authserver.urls")),
    path("codex/", include("mycodex.urls")),
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
    path("o/register/", authserver_views.RateLimitedRegistrationView.as_view()),
    path("o/", include("oauth2_provider.urls")),
]
