"""Settings for Agent Codex, read from the environment in this one file.

A fresh checkout runs on SQLite with no configuration at all. Production sets
``SECRET_KEY``, ``DATABASE_URL``, ``CODEX_PUBLIC_URL`` and ``ALLOWED_HOSTS``.

Importing this module reads the environment and nothing else: it makes no
directories, writes no files and never exits. A bad configuration (no
``SECRET_KEY`` outside debug, a public URL with a path) is refused at start-up by
``codex_site.checks``; tests configure themselves in ``codex_site.test_runner``.
"""

import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from authserver.core.scopes import READ, SCOPES
from authserver.core.sso_config import allauth_providers, parse_providers
from codex_site.database_url import database_settings

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("CODEX_VAR_DIR", BASE_DIR / "var"))


def envbool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    if value.lower() in {"1", "true", "yes", "on"}:
        return True
    if value.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), not {value!r}")


def envint(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, not {value!r}") from None


def envlist(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = envbool("DJANGO_DEBUG", False)

# Empty outside debug means "refuse to start" (codex_site.checks); the test runner brings
# its own key. In debug, `make run`'s first-run step keeps a local key in var/, so signed
# cursors and sessions survive restarts; it is read here, never written.
DEV_SECRET_KEY_FILE = VAR_DIR / "dev-secret-key"
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY and DEBUG and DEV_SECRET_KEY_FILE.is_file():
    SECRET_KEY = DEV_SECRET_KEY_FILE.read_text().strip()

# The public base URL of this server: the MCP resource is <base>/mcp, the OAuth issuer <base>/o.
# Everything derived from it is set together by public_url_settings() below.
CODEX_PUBLIC_URL = os.environ.get("CODEX_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
_public = urlsplit(CODEX_PUBLIC_URL)

# How the server shows itself before anyone connects (mcp_endpoint.identity): the website its
# serverInfo, server card and server.json link ("" = the public URL's home page), and its name
# in the MCP Registry ("" = <the public host in reverse-DNS form>/agent-codex), a namespace its
# operator proves to the registry.
CODEX_WEBSITE_URL = os.environ.get("CODEX_WEBSITE_URL", "").strip()
CODEX_REGISTRY_NAME = os.environ.get("CODEX_REGISTRY_NAME", "").strip()

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", [_public.hostname or "127.0.0.1", "127.0.0.1", "localhost", "[::1]"])

# CORS (django-cors-headers) for the OAuth endpoints a browser-based MCP client calls:
# token, registration, revocation and the authorization-server metadata (plus the OpenID
# discovery URLs clients probe, so that a page can read their 404). Never the sign-in,
# consent or admin pages. Which origins: CODEX_ALLOWED_ORIGINS, matched by
# common.origins (through authserver.oauth.cors), the same rule /mcp uses; any other
# origin gets 403 on these paths, as on /mcp.
CORS_URLS_REGEX = (
    r"^/(o/(token|revoke_token)/|o/register/([^/]+/)?"
    r"|(o/)?\.well-known/(oauth-authorization-server|openid-configuration)(/o)?/?)$"
)
CORS_ALLOWED_ORIGINS: list[str] = []
CORS_ALLOW_HEADERS = ("accept", "authorization", "content-type", "mcp-protocol-version")
CORS_ALLOW_METHODS = ("GET", "POST", "PUT", "DELETE", "OPTIONS")
CORS_EXPOSE_HEADERS = ("WWW-Authenticate", "Retry-After")
CORS_PREFLIGHT_MAX_AGE = 600

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "corsheaders",
    "oauth2_provider",
    # Accounts: sign-in with its throttle, single sign-on through OpenID Connect, a second
    # factor (authserver.people.signin, authserver.enterprise.sso, authserver.people.second_factor configure them).
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "allauth.mfa",
    "codex_site",
    "authserver",
    # SCIM 2.0 provisioning at /scim/v2/ (its own tables: app label "scim").
    "authserver.enterprise.scim",
    "notebook",
    "mcp_endpoint",
    "mycodex",
]

MIDDLEWARE = [
    # Outermost: a streaming answer (a static file, an export) streams under ASGI, block by block.
    "codex_site.middleware.AsyncStreamingMiddleware",
    # Then: a form body in a charset Django cannot read is a 415 before anything reads it.
    "codex_site.middleware.FormCharsetMiddleware",
    # Then U+0000 anywhere in a request's texts is a 400, before any lookup (PostgreSQL refuses it).
    "codex_site.middleware.NulCharacterMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS and JS) from STATIC_ROOT, before anything else runs for them.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # On the CORS paths (CORS_URLS_REGEX), an Origin that is not allowed gets 403, preflight or not.
    "authserver.oauth.cors.OriginGuardMiddleware",
    # Before CommonMiddleware, so that preflights are answered before anything else runs.
    "corsheaders.middleware.CorsMiddleware",
    "django.middleware.common.CommonMiddleware",
    # A `next` leading off this site is dropped from the query before any page renders or follows it.
    "codex_site.middleware.UnsafeNextMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    # CODEX_REQUIRE_MFA / CODEX_REQUIRE_MFA_STAFF: a password account without a second factor
    # sees only the pages that set one up (the admin included).
    "authserver.people.second_factor.RequireSecondFactorMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Content-Security-Policy on every answer (django-csp; CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    # The site's 400/403/404 pages in debug too (codex_site.errors); Django's handlers otherwise.
    "codex_site.errors.ErrorPagesMiddleware",
    # Last, so it sees the view's exceptions first: a database outage is a 503, one log line.
    "codex_site.middleware.DatabaseUnavailableMiddleware",
]
# A stale form (signed out in another tab) gets a page that says so, not Django's developer page.
CSRF_FAILURE_VIEW = "codex_site.errors.csrf_failure"

ROOT_URLCONF = "codex_site.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# ASGI only: /mcp is served by the MCP SDK inside codex_site.asgi; there is no WSGI entry point.
ASGI_APPLICATION = "codex_site.asgi.application"

# SQLite by default: embedded, WAL so readers never wait for the writer, IMMEDIATE
# transactions and a busy timeout so concurrent writers queue instead of failing
# with "database is locked".
SQLITE_PATH = Path(os.environ.get("CODEX_SQLITE_PATH", VAR_DIR / "codex.sqlite3"))
# Worker threads keep their connection between requests for this many seconds (Django's
# persistent connections, health-checked before reuse). The test runner uses 0.
CONN_MAX_AGE = envint("CODEX_CONN_MAX_AGE", 60)
# PostgreSQL only (docs/deploy.md, "Connections"). CODEX_DB_POOL_SIZE > 0: Django's connection
# pool (psycopg_pool) of at most that many connections per worker process, shared by its
# threads, instead of one persistent connection per thread. CODEX_PG_PREPARE_THRESHOLD: after
# how many runs on a connection a fast-path statement is prepared on the server (psycopg's
# prepare_threshold); "none" never prepares (a pgbouncer in transaction mode before 1.21).
DB_POOL_SIZE = envint("CODEX_DB_POOL_SIZE", 0)
# PostgreSQL only: the seconds a tool call's database work may take before the call answers
# `unavailable` (mcp_endpoint.boundary), well inside a client's timeout (30 to 60 s) and
# nginx's proxy_read_timeout (60 s), whatever the work waits for.
CODEX_CALL_DEADLINE_SECONDS = envint("CODEX_CALL_DEADLINE_SECONDS", 20)
_prepare = os.environ.get("CODEX_PG_PREPARE_THRESHOLD", "").strip().lower()
PG_PREPARE_THRESHOLD = None if _prepare == "none" else envint("CODEX_PG_PREPARE_THRESHOLD", 2)
if os.environ.get("DATABASE_URL"):
    DATABASES = {
        # dj-database-url's reading, plus libpq's list of hosts for a replicated PostgreSQL
        # (codex_site.database_url); health checks notice a connection a failover killed.
        "default": database_settings(
            os.environ["DATABASE_URL"],
            conn_max_age=CONN_MAX_AGE,
            conn_health_checks=True,
            postgresql_options={"prepare_threshold": PG_PREPARE_THRESHOLD},
            pool={"min_size": 1, "max_size": DB_POOL_SIZE, "timeout": 10} if DB_POOL_SIZE > 0 else None,
        )
    }
else:
    # The directory is made at start-up (codex_site.apps), not here.
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": SQLITE_PATH,
            "CONN_MAX_AGE": CONN_MAX_AGE,
            "CONN_HEALTH_CHECKS": True,
            # A file, not Django's in-memory default: end-to-end tests serve requests
            # from other threads, which must see the same database with real locking.
            "TEST": {"NAME": str(VAR_DIR / "test-codex.sqlite3")},
        }
    }

# The fast path (notebook.sql, notebook.sqlite): statements built once per database, and on
# SQLite the writer queue, group sync and checkpointer. CODEX_FAST_PATH=0 runs every service
# and selector on the plain Django ORM and SQLite with synchronous=FULL (docs/architecture.md).
CODEX_FAST_PATH = envbool("CODEX_FAST_PATH", True)

SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    # synchronous=NORMAL: COMMIT does not sync the log; notebook writes sync it themselves
    # before they return, several commits per sync (notebook.sqlite.group_sync), so nothing
    # acknowledged is lost to a power cut. Without the fast path, COMMIT syncs (FULL).
    # wal_autocheckpoint: a backstop only; a thread checkpoints after commits, off the
    # request path (notebook.sqlite.checkpointer), long before the log reaches 20,000 pages.
    "init_command": (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA wal_autocheckpoint=20000;"
        if CODEX_FAST_PATH
        else "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
    ),
}
# Every SQLite database gets them, however it was configured (DATABASE_URL=sqlite:///...
# too); options given explicitly win.
for _database in DATABASES.values():
    if _database["ENGINE"] == "django.db.backends.sqlite3":
        _database["OPTIONS"] = {**SQLITE_OPTIONS, **_database.get("OPTIONS", {})}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Collected files are code, not state: the OCI image collects them at build time into its
# read-only tree (CODEX_STATIC_ROOT), outside the volume that holds CODEX_VAR_DIR.
STATIC_ROOT = Path(os.environ.get("CODEX_STATIC_ROOT", VAR_DIR / "static"))
# WhiteNoise serves what `collectstatic` put in STATIC_ROOT: names with a content hash
# (cached for a year) and gzip copies, the same under `make run` (which collects first) and
# in production, where nginx may serve /static/ itself as an optimisation. Not from the
# finders, even in debug, so that a page that works locally works deployed. (The test
# runner uses Django's plain storage and the finders: tests do not run collectstatic.) A name
# nothing collected is linked plainly, never a 500 (codex_site.staticfiles).
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "codex_site.staticfiles.CodexStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = False
WHITENOISE_AUTOREFRESH = False

LOGIN_URL = "/accounts/login/"

# --- Accounts (django-allauth): sign-in, its throttle, single sign-on, a second factor ----
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "allauth.account.auth_backends.AuthenticationBackend",
]
ACCOUNT_ADAPTER = "authserver.people.signin.CodexAccountAdapter"
SOCIALACCOUNT_ADAPTER = "authserver.enterprise.sso.CodexSocialAccountAdapter"
# People sign in with their username; operators add them (codex_adduser) or a provider does
# (single sign-on): nobody signs up with a password, and this server sends no mail.
ACCOUNT_LOGIN_METHODS = {"username"}
# (allauth keeps the sign-in form's password field only while sign-up would ask for one.)
ACCOUNT_SIGNUP_FIELDS = ["username*", "email", "password1*", "password2*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_LOGOUT_ON_GET = False  # GET /accounts/logout/ asks; the POST signs out
ACCOUNT_AUTHENTICATED_LOGIN_REDIRECTS = False  # the sign-in page says who is signed in
ACCOUNT_SESSION_REMEMBER = None
ACCOUNT_FORMS = {"change_password": "authserver.people.signin.CodexChangePasswordForm"}
ACCOUNT_PASSWORD_INPUT_RENDER_VALUE = False
ACCOUNT_EMAIL_NOTIFICATIONS = False
ACCOUNT_REAUTHENTICATION_TIMEOUT = 300
# Failed sign-ins (every place a password is checked goes through the adapter's
# authenticate: the sign-in and admin pages, reauthentication): at most
# CODEX_SIGNIN_FAILURES_PER_ACCOUNT per CODEX_SIGNIN_FAILURE_WINDOW_SECONDS for one account, and
# CODEX_SIGNIN_FAILURES_PER_ADDRESS per minute from one address; past either, refused (the
# right password too) until the oldest failure leaves the window. Never a permanent lock.
CODEX_SIGNIN_FAILURES_PER_ACCOUNT = envint("CODEX_SIGNIN_FAILURES_PER_ACCOUNT", 5)
CODEX_SIGNIN_FAILURE_WINDOW_SECONDS = envint("CODEX_SIGNIN_FAILURE_WINDOW_SECONDS", 300)
CODEX_SIGNIN_FAILURES_PER_ADDRESS = envint("CODEX_SIGNIN_FAILURES_PER_ADDRESS", 10)
# Sign-in attempts of any outcome from one network (an IPv4 address, an IPv6 /64) per minute:
# people behind one office address signing in at 9 o'clock are not a flood. Each attempt costs
# one password hash; only an attempt with a right password gets past the failures' limit.
CODEX_SIGNINS_PER_ADDRESS = envint("CODEX_SIGNINS_PER_ADDRESS", 120)
ACCOUNT_RATE_LIMITS = {
    "login_failed": (
        f"{CODEX_SIGNIN_FAILURES_PER_ADDRESS}/m/ip,"
        f"{CODEX_SIGNIN_FAILURES_PER_ACCOUNT}/{CODEX_SIGNIN_FAILURE_WINDOW_SECONDS}s/key"
    ),
    # Every sign-in attempt, successful or not, per network and minute (failures are held far
    # lower above): sized for an office whose people sign in together in the morning.
    "login": f"{CODEX_SIGNINS_PER_ADDRESS}/m/ip",
    # Above the per-account failure limit, which engages first (with its wait in words).
    "change_password": "10/m/user",
    "reauthenticate": "10/m/user",
}
# Single sign-on (authserver.enterprise.sso): CODEX_OIDC_PROVIDERS, a JSON list of providers (issuer,
# client id and secret, display name, allowed email domains, whether an existing account may
# be matched by its verified email). CODEX_PASSWORD_SIGNIN=0 hides the password form.
CODEX_OIDC_PROVIDERS = os.environ.get("CODEX_OIDC_PROVIDERS", "")
CODEX_PASSWORD_SIGNIN = envbool("CODEX_PASSWORD_SIGNIN", True)
CODEX_SSO_PROVIDERS = parse_providers(CODEX_OIDC_PROVIDERS)
# The operator's policy (authserver.core.policy, shown at /admin/policy/): people whose e-mail domain
# is listed here must use single sign-on; their password sign-in is refused, after the password
# is checked (comma-separated domains; empty: nobody).
CODEX_SSO_ONLY_DOMAINS = [domain.lower() for domain in envlist("CODEX_SSO_ONLY_DOMAINS", [])]
# ID-JAGs (authserver.enterprise.id_jag) from public clients, which authenticate with their id
# alone: off, as the draft advises (whoever holds such an ID-JAG can redeem it). Shown at /admin/policy/.
CODEX_ID_JAG_PUBLIC_CLIENTS = envbool("CODEX_ID_JAG_PUBLIC_CLIENTS", False)
SOCIALACCOUNT_PROVIDERS: dict[str, Any] = allauth_providers(CODEX_SSO_PROVIDERS)
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False  # per provider: authserver.enterprise.sso
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = True
SOCIALACCOUNT_LOGIN_ON_GET = False  # the sign-in page's button POSTs
SOCIALACCOUNT_STORE_TOKENS = False  # the provider's tokens are not needed after sign-in
SOCIALACCOUNT_REQUESTS_TIMEOUT = 10
# A second factor for password accounts: TOTP, passkeys (WebAuthn), recovery codes.
MFA_ADAPTER = "authserver.people.second_factor.CodexMFAAdapter"
MFA_SUPPORTED_TYPES = ["totp", "webauthn", "recovery_codes"]
MFA_PASSKEY_LOGIN_ENABLED = False
MFA_TOTP_ISSUER = "Agent Codex"
MFA_WEBAUTHN_ALLOW_INSECURE_ORIGIN = envbool("CODEX_WEBAUTHN_ALLOW_HTTP", DEBUG)
MFA_RECOVERY_CODE_COUNT = 10
# CODEX_REQUIRE_MFA=1: every local (password) account sets up a second factor at its next
# sign-in; CODEX_REQUIRE_MFA_STAFF=1: staff accounts only (the default: the admin's).
CODEX_REQUIRE_MFA = envbool("CODEX_REQUIRE_MFA", False)
CODEX_REQUIRE_MFA_STAFF = envbool("CODEX_REQUIRE_MFA_STAFF", CODEX_REQUIRE_MFA)

# Content-Security-Policy (django-csp) on every answer: scripts, styles, images and fetches
# from this origin only, no inline script or style, no frames, no plugins. Forms post here
# only, but the sign-in page's may also lead to a single sign-on provider
# (authserver.people.signin) and the authorization endpoint's to the client's registered redirect
# URI, which can be any scheme (authserver.oauth.views). The passkey pages' scripts are allauth's
# static files; their data is JSON in <script type="application/json">, which no policy runs.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'none'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "font-src": ["'self'"],
        "manifest-src": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'none'"],
        "object-src": ["'none'"],
    }
}

# Production hardening that only makes sense behind HTTPS.
if _public.scheme == "https":
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
# No SECURE_PROXY_SSL_HEADER: whether a request came over HTTPS is the ASGI scope's scheme, which
# uvicorn takes from X-Forwarded-Proto only when the peer is in CODEX_TRUSTED_PROXIES
# (codex_site.serve), the one list that decides the client's address too. The setting would make
# Django believe the header from any peer, whoever sent it.

# The largest export file a person may upload at /codex/import/ (operators use
# `manage.py codex_import` for larger ones). Uploads over FILE_UPLOAD_MAX_MEMORY_SIZE
# (Django's 2.5 MB default) are spooled to a temporary file, not held in memory.
CODEX_IMPORT_MAX_BYTES = envint("CODEX_IMPORT_MAX_BYTES", 32 * 1024 * 1024)
# Every request body, before Django or the MCP SDK sees it (codex_site.bodies): at most this
# many bytes (413; the import upload has CODEX_IMPORT_MAX_BYTES, /mcp the contract's 1 MiB),
# arriving within this many seconds of the request's headers (408).
CODEX_BODY_MAX_BYTES = envint("CODEX_BODY_MAX_BYTES", 1024 * 1024)
# SCIM (authserver.enterprise.scim.schema): accept and drop User attributes this server does not keep,
# instead of refusing them (for an IdP whose attribute mapping cannot be trimmed).
CODEX_SCIM_IGNORE_UNKNOWN = envbool("CODEX_SCIM_IGNORE_UNKNOWN", False)
CODEX_BODY_TIMEOUT_SECONDS = envint("CODEX_BODY_TIMEOUT_SECONDS", 60)
# Rate limits per client address: dynamic client registrations per hour, and sign-ins
# that make the server fetch a new client's metadata document per 10 minutes.
CODEX_DCR_RATE_LIMIT = envint("CODEX_DCR_RATE_LIMIT", 300)
CODEX_CIMD_RATE_LIMIT = envint("CODEX_CIMD_RATE_LIMIT", 30)
# Client registrations that no person has approved yet (authserver.clients.registration), dynamic ones
# and applications made from metadata documents alike: removed once this old; at most so many
# wait per client network (refused past it), and at most so many in all (the oldest make room).
CODEX_DCR_PENDING_SECONDS = envint("CODEX_DCR_PENDING_SECONDS", 3600)
CODEX_DCR_PENDING_PER_ADDRESS = envint("CODEX_DCR_PENDING_PER_ADDRESS", 100)
CODEX_DCR_PENDING_MAX = envint("CODEX_DCR_PENDING_MAX", 1000)
# Quotas (contract 6, resource_exhausted): tool calls per access token per minute, shared
# by every worker through the database cache; entries and stored bytes (every revision
# counted) per codex, kept in the codex row.
CODEX_TOOL_CALLS_PER_MINUTE = envint("CODEX_TOOL_CALLS_PER_MINUTE", 600)
CODEX_QUOTA_ENTRIES = envint("CODEX_QUOTA_ENTRIES", 1_000_000)
CODEX_QUOTA_STORED_BYTES = envint("CODEX_QUOTA_STORED_BYTES", 5 * 1024**3)
# Prometheus metrics at /metrics (codex_metrics): on unless CODEX_METRICS=0. Served only to
# the client addresses or networks in CODEX_METRICS_ALLOW (loopback by default; "none" for no
# address) or with "Authorization: Bearer $CODEX_METRICS_TOKEN"; anyone else gets a 404.
CODEX_METRICS = envbool("CODEX_METRICS", True)
CODEX_METRICS_ALLOW = (
    []
    if os.environ.get("CODEX_METRICS_ALLOW", "").strip().lower() == "none"
    else envlist("CODEX_METRICS_ALLOW", ["127.0.0.1", "::1"])
)
CODEX_METRICS_TOKEN = os.environ.get("CODEX_METRICS_TOKEN", "")
# Client ID Metadata Documents on loopback addresses (a local client): debug only, and the
# test runner turns it on.
CODEX_CIMD_ALLOW_LOOPBACK = envbool("CODEX_CIMD_ALLOW_LOOPBACK", DEBUG)
# Fetches of clients' metadata documents and key sets in progress at once, per process, and the
# shares of them one client network (an IPv6 /64) and one block of networks (an IPv6 /48, an IPv4
# /24) may hold (authserver.clients.fetching); each has a deadline of CIMD_FETCH_TIMEOUT_SECONDS
# over the whole exchange. A fetch still running after CODEX_FETCH_PATIENCE_SECONDS gives its slot
# up to a newcomer that finds every slot taken (and ends as too slow).
CODEX_FETCHES_AT_ONCE = envint("CODEX_FETCHES_AT_ONCE", 10)
CODEX_FETCHES_AT_ONCE_PER_ADDRESS = envint("CODEX_FETCHES_AT_ONCE_PER_ADDRESS", 2)
CODEX_FETCHES_AT_ONCE_PER_BLOCK = envint("CODEX_FETCHES_AT_ONCE_PER_BLOCK", 4)
CODEX_FETCH_PATIENCE_SECONDS = envint("CODEX_FETCH_PATIENCE_SECONDS", 2)
# Failed client authentications at the token, revocation and introspection endpoints
# (authserver.clients.authentication), per minute: from one client network (an IPv4 address, an
# IPv6 /64) against any client, and against one client from any network; past either, refused
# before the secret is hashed (429). A network that has not failed against a client is still
# checked while that client is at its limit: a stranger's failures never lock its own owner out.
CODEX_CLIENT_AUTH_FAILURES_PER_NETWORK = envint("CODEX_CLIENT_AUTH_FAILURES_PER_NETWORK", 20)
CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT = envint("CODEX_CLIENT_AUTH_FAILURES_PER_CLIENT", 10)
# Token introspection (RFC 7662) is for resource servers an operator provisions: the client ids
# of confidential applications (made in the admin) allowed to introspect, comma-separated.
# Anyone else gets 401. Empty: nobody may, and the metadata names no introspection endpoint.
CODEX_INTROSPECTION_CLIENTS = envlist("CODEX_INTROSPECTION_CLIENTS", [])
# The operator's policy (authserver.core.policy): Dynamic Client Registration on or off (off: the
# registration endpoint answers 403 and the metadata names none); the longest access-token
# lifetime any token may have (mint_token refuses a longer one; CODEX_ACCESS_TOKEN_SECONDS above
# it refuses to start). Metadata documents' hosts: CODEX_CIMD_ALLOWED_HOSTS, below.
CODEX_DCR_ENABLED = envbool("CODEX_DCR_ENABLED", True)
CODEX_ACCESS_TOKEN_SECONDS = envint("CODEX_ACCESS_TOKEN_SECONDS", 3600)
CODEX_MAX_ACCESS_TOKEN_SECONDS = envint("CODEX_MAX_ACCESS_TOKEN_SECONDS", CODEX_ACCESS_TOKEN_SECONDS)
# Headless agents (authserver.clients.agents): how many a person may have at once (revoked ones do not
# count). Each is an OAuth client that can act on its owner's codex without them.
CODEX_AGENTS_PER_PERSON = envint("CODEX_AGENTS_PER_PERSON", 10)


def oauth2_provider_settings(public_url: str) -> dict:
    """django-oauth-toolkit as this server's OAuth 2.1 authorization server, issuer <public_url>/o."""
    return {
        "SCOPES": SCOPES,
        "DEFAULT_SCOPES": [READ],
        "ACCESS_TOKEN_EXPIRE_SECONDS": CODEX_ACCESS_TOKEN_SECONDS,
        "REFRESH_TOKEN_EXPIRE_SECONDS": envint("CODEX_REFRESH_TOKEN_SECONDS", 30 * 24 * 3600),
        "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
        # Authorization code + PKCE S256 for every client; "plain" is refused.
        "PKCE_REQUIRED": True,
        "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
        # Refresh tokens rotate; replaying a rotated one revokes its whole family.
        "ROTATE_REFRESH_TOKEN": True,
        "REFRESH_TOKEN_REUSE_PROTECTION": True,
        "REFRESH_TOKEN_GRACE_PERIOD_SECONDS": 0,  # a grace period cannot work with hashed storage
        # RFC 9700: only a SHA-256 checksum of each token at rest, never the token.
        "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
        # RFC 9207 iss in authorization responses, advertised in the metadata.
        "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
        "OIDC_ISS_ENDPOINT": public_url + "/o",
        # Tokens only in the Authorization header; no implicit or password grants.
        "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
        "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
        "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
        "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
        # client_credentials: served only to people's headless agents (authserver.oauth.validators).
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
        # private_key_jwt: for clients whose metadata document declares it (authserver.clients.assertions).
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": [
            "none",
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt",
        ],
        # RFC 8707: every grant and token is bound to <public_url>/mcp.
        "OAUTH2_VALIDATOR_CLASS": "authserver.oauth.validators.CodexOAuth2Validator",
        # oauthlib's server with the jwt-bearer grant for ID-JAGs (Enterprise-Managed Authorization).
        "OAUTH2_SERVER_CLASS": "authserver.enterprise.id_jag.CodexServer",
        # Dynamic Client Registration (RFC 7591) for clients that do not use metadata documents.
        "DCR_ENABLED": True,
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
        "DCR_REGISTRATION_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,
        # Client ID Metadata Documents (preferred by MCP 2026-07-28).
        "CIMD_ENABLED": True,
        "CIMD_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.cimd.HostAllowlistCIMDPermission",),
        "CIMD_ALLOWED_HOSTS": envlist("CODEX_CIMD_ALLOWED_HOSTS", ["*"]),
        "CIMD_METADATA_FETCHER": "authserver.clients.cimd.CodexMetadataFetcher",
        # Always ask the person; never approve silently.
        "REQUEST_APPROVAL_PROMPT": "force",
    }


def public_url_settings(public_url: str) -> dict[str, Any]:
    """Every setting derived from the public URL, so a server on another address (a test's
    live server) rebuilds them together with one override."""
    return {
        "CODEX_PUBLIC_URL": public_url,
        "CODEX_RESOURCE_URL": public_url + "/mcp",
        "CODEX_ISSUER_URL": public_url + "/o",
        # Origins a browser-based MCP client may call /mcp from; requests without Origin are not browsers.
        "CODEX_ALLOWED_ORIGINS": envlist("CODEX_ALLOWED_ORIGINS", [public_url]),
        "CSRF_TRUSTED_ORIGINS": [public_url],
        "OAUTH2_PROVIDER": oauth2_provider_settings(public_url),
    }


# CODEX_RESOURCE_URL, CODEX_ISSUER_URL, CODEX_ALLOWED_ORIGINS, CSRF_TRUSTED_ORIGINS, OAUTH2_PROVIDER
globals().update(public_url_settings(CODEX_PUBLIC_URL))

# DOT's own default, named here because notebook.EntryRevision keeps a foreign key to the
# application that wrote it, and Django resolves a swappable model through this setting.
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"

CACHES = {
    # Security state, shared by every worker process: allauth's sign-in and second-factor
    # throttle counters and its marks of used TOTP codes (allauth uses this alias only), this
    # server's per-address and per-token limits, and clients' key sets with their fetch state.
    # It never evicts a live entry: a write sweeps out the expired ones (at most every 10 s per
    # process), and nothing else; past MAX_ENTRIES live rows a sweep logs a WARNING and refuses
    # nothing (common.durable_cache). A write the database refuses raises (a 503), never passes
    # as an empty counter. Every entry is written with a timeout.
    "default": {
        "BACKEND": "common.durable_cache.DurableDatabaseCache",
        "LOCATION": "codex_cache",
        "OPTIONS": {"MAX_ENTRIES": 10_000},
    },
    # Notes that only make a page more helpful, and that a stranger's requests can make: why a
    # client's metadata document was refused (kept while it is not fetched again). A table of
    # their own, culled as Django culls, so that no flood of them can touch the entries above.
    "notes": {
        "BACKEND": "django.core.cache.backends.db.DatabaseCache",
        "LOCATION": "codex_notes_cache",
        "OPTIONS": {"MAX_ENTRIES": 5_000},
    },
}

# A person signs in to read their notes; the OAuth flow brings its own `next`.
LOGIN_REDIRECT_URL = "/codex/"
LOGOUT_REDIRECT_URL = "/"

# CODEX_LOG_FORMAT: "plain" lines of text, or "json", one object per line (codex_site.logs).
CODEX_LOG_FORMAT = os.environ.get("CODEX_LOG_FORMAT", "").strip().lower() or "plain"
if CODEX_LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(f"CODEX_LOG_FORMAT must be plain or json, not {CODEX_LOG_FORMAT!r}")
# No line shows where in the source it was logged from, nor the thread or process: the
# record need not find them (the Logging HOWTO's "Optimization"), which is a good part of
# what a line costs a tool call.
logging._srcfile = None
logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
# uvicorn's own loggers go through the same handler (one format for every line). Its access
# lines are off: common.access_log writes one line per request (with its duration, and a
# tool call's fields), without query strings' values. Its access logger has no handler, as
# uvicorn's --no-access-log leaves it: uvicorn then skips the line's arguments (the path
# quoted again) that it makes for every answer while the logger has one, even at WARNING.
_UVICORN_LOGGER = {"handlers": ["console"], "propagate": False}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"()": "codex_site.logs.CodexPlainFormatter"},
        "json": {"()": "codex_site.logs.CodexJsonFormatter"},
    },
    "filters": {
        # A client's mistake (a 4xx, a bad Host, a broken form) is one WARNING line without a
        # traceback; ERROR is left for the server's own faults (codex_site.logfilters).
        "client_mistakes": {"()": "codex_site.logfilters.ClientMistakesAreWarnings"},
        # Their DEBUG lines carry authorization codes, state and tokens: dropped whatever
        # CODEX_LOG_LEVEL says (as django.db.backends' below, whose DEBUG lines carry notes).
        "no_oauth_debug": {"()": "codex_site.logs.NoDebugFrom", "names": ["oauthlib", "oauth2_provider"]},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": CODEX_LOG_FORMAT,
            "filters": ["no_oauth_debug", "client_mistakes"],
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("CODEX_LOG_LEVEL", "INFO")},
    "loggers": {
        "uvicorn": _UVICORN_LOGGER,
        "uvicorn.error": _UVICORN_LOGGER,
        "uvicorn.access": {"handlers": [], "propagate": False, "level": "WARNING"},
        "django.db.backends": {"level": "WARNING"},
        # The stateless transport logs every request's teardown at INFO.
        "mcp.server.streamable_http": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "django.request": {"level": "WARNING"},
        "django.security": {"level": "WARNING"},
    },
}

# Tests configure themselves (fast hasher, throwaway key, CONN_MAX_AGE 0, quiet logs,
# loopback metadata documents) in their runner, not by sniffing the command line here.
TEST_RUNNER = "codex_site.test_runner.CodexTestRunner"
