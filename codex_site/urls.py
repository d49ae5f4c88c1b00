from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from oauth2_provider import urls as dot_urls

from authserver import views as authserver_views
from authserver.registration import GuardedRegistrationManagementView
from authserver.token_view import CodexTokenView
from codex_site import views as site_views

# Only the endpoints this server advertises. DOT's application and token management
# pages (/o/applications/, /o/authorized_tokens/) would let any signed-in person
# register clients for grants the metadata does not offer; the device flow and OIDC
# are off. People see and revoke their clients at /account/clients/ instead.
_SERVED = {"authorize", "token", "revoke-token", "introspect"}
# DOT's authorization-server metadata view is replaced by ours (it adds the assertion
# algorithms), under the same names.
_SERVER_METADATA = {"oauth-server-metadata", "oauth-server-metadata-issuer"}
OAUTH_ENDPOINTS = (
    [pattern for pattern in dot_urls.metadata_urlpatterns if pattern.name not in _SERVER_METADATA]
    + [
        path(
            ".well-known/oauth-authorization-server",
            authserver_views.CodexServerMetadataView.as_view(),
            name="oauth-server-metadata",
        ),
        path(
            ".well-known/oauth-authorization-server/<path:issuer_path>",
            authserver_views.CodexServerMetadataView.as_view(),
            name="oauth-server-metadata-issuer",
        ),
    ]
    + [pattern for pattern in dot_urls.base_urlpatterns if pattern.name in _SERVED]
    + dot_urls.dcr_urlpatterns
)

urlpatterns = [
    path("", site_views.home, name="home"),
    path("healthz", site_views.healthz, name="healthz"),
    path("metrics", site_views.metrics, name="metrics"),
    path("admin/", admin.site.urls),
    # Sign-in, sign-out and changing one's password. Not the password-reset pages: they
    # mail a link, and this server sends no mail (an operator sets a forgotten password
    # with `manage.py changepassword`).
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", auth_views.PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", auth_views.PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("account/clients/", include("authserver.urls")),
    path("codex/", include("mycodex.urls")),
    # RFC 8414 metadata for issuer <base>/o: the path-suffixed form MCP clients try first,
    # and the root form. OIDC_ISS_ENDPOINT makes both report the same issuer.
    path(".well-known/oauth-authorization-server/o", authserver_views.CodexServerMetadataView.as_view()),
    path(".well-known/oauth-authorization-server", authserver_views.CodexServerMetadataView.as_view()),
    # OIDC is off; answer its discovery URLs with a plain 404 rather than DOT's debug error.
    path(".well-known/openid-configuration/o", site_views.not_found),
    path("o/.well-known/openid-configuration", site_views.not_found),
    path("o/.well-known/openid-configuration/", site_views.not_found),
    # This server's versions of two DOT endpoints, resolved before DOT's own.
    path("o/authorize/", authserver_views.CodexAuthorizationView.as_view()),
    path("o/token/", CodexTokenView.as_view()),
    path("o/register/", authserver_views.RateLimitedRegistrationView.as_view()),
    path("o/register/<str:client_id>/", GuardedRegistrationManagementView.as_view()),
    path("o/", include((OAUTH_ENDPOINTS, "oauth2_provider"))),
]

# Site-styled error pages (JSON on the API paths); codex_site.errors also serves them in debug.
handler400 = "codex_site.errors.bad_request"
handler403 = "codex_site.errors.permission_denied"
handler404 = "codex_site.errors.page_not_found"
handler500 = "codex_site.errors.server_error"
