from django.contrib import admin
from django.urls import include, path
from oauth2_provider.views import OAuthServerMetadataView

from authserver import views as authserver_views
from codex_site import views as site_views

urlpatterns = [
    path("", site_views.home, name="home"),
    path("healthz", site_views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("account/clients/", include("authserver.urls")),
    path("codex/", include("mycodex.urls")),
    # RFC 8414 metadata for issuer <base>/o: the path-suffixed form MCP clients try first,
    # and the root form. OIDC_ISS_ENDPOINT makes both report the same issuer.
    path(".well-known/oauth-authorization-server/o", OAuthServerMetadataView.as_view()),
    path(".well-known/oauth-authorization-server", OAuthServerMetadataView.as_view()),
    # OIDC is off; answer its discovery URLs with a plain 404 rather than DOT's debug error.
    path(".well-known/openid-configuration/o", site_views.not_found),
    path("o/.well-known/openid-configuration", site_views.not_found),
    path("o/.well-known/openid-configuration/", site_views.not_found),
    # This server's versions of two DOT endpoints, resolved before DOT's own.
    path("o/authorize/", authserver_views.CodexAuthorizationView.as_view()),
    path("o/register/", authserver_views.RateLimitedRegistrationView.as_view()),
    path("o/", include("oauth2_provider.urls")),
]
