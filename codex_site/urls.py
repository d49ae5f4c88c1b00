from allauth.account import views as account_views
from allauth.account.decorators import secure_admin_login
from allauth.socialaccount import views as social_views
from django.contrib import admin
from django.shortcuts import redirect
from django.urls import include, path, re_path
from django.views.generic import RedirectView
from oauth2_provider import urls as dot_urls

from authserver import admin as authserver_admin
from authserver.enterprise import sso
from authserver.enterprise.scim import views as scim_views
from authserver.oauth import views as authserver_views
from authserver.oauth.token_view import CodexTokenView
from authserver.people import account
from codex_site import views as site_views

# Only the endpoints this server advertises. DOT's application and token management
# pages (/o/applications/, /o/authorized_tokens/) would let any signed-in person
# register clients for grants the metadata does not offer; the device flow and OIDC
# are off. People see and revoke their clients at /account/clients/ instead.
_SERVED = {"authorize", "token", "revoke-token", "introspect"}
# Of DOT's metadata_urlpatterns, none: its protected-resource metadata under /o/ would name
# the resources <base>/o and <base>/o/<path>, which this server refuses (invalid_target); the
# one resource is /mcp, whose metadata the MCP side serves (mcp_endpoint.http). Its
# authorization-server metadata is replaced by ours (it adds the assertion algorithms), here
# in the issuer + well-known form some clients try, under DOT's name (DOT reverses it). The
# RFC 8414 forms are at the root, below; a path after this one would name another issuer.
OAUTH_ENDPOINTS = (
    [
        path(
            ".well-known/oauth-authorization-server",
            authserver_views.CodexServerMetadataView.as_view(),
            name="oauth-server-metadata",
        ),
    ]
    + [pattern for pattern in dot_urls.base_urlpatterns if pattern.name in _SERVED]
    + dot_urls.dcr_urlpatterns
)

# The admin carries the site's name (staff reach it from the site's header, and it links back).
admin.site.site_header = "Agent Codex administration"
admin.site.site_title = "Agent Codex admin"
# The admin signs in on the site's own sign-in page, with its throttle and second factor.
admin.site.login = secure_admin_login(admin.site.login)  # type: ignore[method-assign]
# ... and changes their password on the site's page, where the current password passes the
# same throttle (the admin's own form checks it with a bare check_password).
admin.site.password_change = lambda request, extra_context=None: redirect("account_change_password")  # type: ignore[method-assign]

# django-allauth's pages this server serves: not sign-up with a password, e-mail management
# or password reset (they mail a link, and this server sends no mail; an operator sets a
# forgotten password with `manage.py changepassword`).
ACCOUNT_PAGES = [
    path("login/", account.CodexLoginView.as_view(), name="account_login"),
    path("logout/", account_views.logout, name="account_logout"),
    path("inactive/", account_views.account_inactive, name="account_inactive"),
    path("reauthenticate/", account_views.reauthenticate, name="account_reauthenticate"),
    path("password/change/", account.password_change, name="account_change_password"),
    # The path Django's own password change had (bookmarks, docs of the last release).
    path("password_change/", RedirectView.as_view(pattern_name="account_change_password")),
    path("2fa/", include("allauth.mfa.urls")),
    # Single sign-on: each provider's sign-in and callback (a provider that fails gets a page).
    path("oidc/<str:provider_id>/login/", sso.login, name="openid_connect_login"),
    path("oidc/<str:provider_id>/login/callback/", sso.callback, name="openid_connect_callback"),
    path("3rdparty/login/cancelled/", social_views.login_cancelled, name="socialaccount_login_cancelled"),
    path("3rdparty/login/error/", social_views.login_error, name="socialaccount_login_error"),
    path("3rdparty/signup/", social_views.signup, name="socialaccount_signup"),
]

urlpatterns = [
    path("", site_views.home, name="home"),
    path("healthz", site_views.healthz, name="healthz"),
    path("favicon.ico", site_views.favicon, name="favicon"),
    path("metrics", site_views.metrics, name="metrics"),
    # The operator's policy, read-only, for staff (authserver.core.policy).
    path("admin/policy/", admin.site.admin_view(authserver_admin.policy_page), name="admin_policy"),
    path("admin/", admin.site.urls),
    # Sign-in (password, single sign-on, second factor), sign-out, password change.
    path("accounts/", include(ACCOUNT_PAGES)),
    # The person's account: password, second factor, connected applications, leaving.
    path("account/", account.account_page, name="account"),
    path("account/delete/", account.delete_account, name="account_delete"),
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
    # This server's versions of DOT endpoints, resolved before DOT's own.
    path("o/authorize/", authserver_views.CodexAuthorizationView.as_view()),
    path("o/token/", CodexTokenView.as_view()),
    path("o/revoke_token/", authserver_views.CodexRevokeTokenView.as_view()),
    path("o/introspect/", authserver_views.ResourceServerIntrospectionView.as_view()),
    path("o/register/", authserver_views.RateLimitedRegistrationView.as_view()),
    path("o/register/<str:client_id>/", authserver_views.CheckedRegistrationManagementView.as_view()),
    path("o/", include((OAUTH_ENDPOINTS, "oauth2_provider"))),
    # SCIM 2.0 provisioning for the organizations' identity providers (every path under it is
    # scim2-server's to route, so that an unknown one gets a SCIM 404).
    re_path(r"^scim/v2(?P<path>/.*)?$", scim_views.scim, name="scim"),
]

# Site-styled error pages (JSON on the API paths); codex_site.errors also serves them in debug.
handler400 = "codex_site.errors.bad_request"
handler403 = "codex_site.errors.permission_denied"
handler404 = "codex_site.errors.page_not_found"
handler500 = "codex_site.errors.server_error"
# allauth's rate limits other than the sign-in throttle (authserver.people.signin) answer with this.
handler429 = "authserver.people.account.too_many_requests"
