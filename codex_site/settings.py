"""Settings for Agent Codex, read from the environment in this one file.

A fresh checkout runs on SQLite with no configuration at all. Production sets
``SECRET_KEY``, ``DATABASE_URL``, ``CODEX_PUBLIC_URL`` and ``ALLOWED_HOSTS``; a
non-debug start without ``SECRET_KEY`` refuses to run.
"""

import os
import sys
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

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


# `manage.py test` runs with its own throwaway key and fast hashing; nothing else does.
TESTING = len(sys.argv) > 1 and sys.argv[1] == "test"

DEBUG = envbool("DJANGO_DEBUG", False)

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if TESTING:
        SECRET_KEY = "test-only-key-not-for-production-" + "x" * 32
    elif DEBUG:
        # A local development key, made once and kept out of git (var/ is ignored),
        # so signed cursors and sessions survive restarts of `make run`.
        from django.core.management.utils import get_random_secret_key

        key_file = VAR_DIR / "dev-secret-key"
        if not key_file.exists():
            VAR_DIR.mkdir(parents=True, exist_ok=True)
            key_file.write_text(get_random_secret_key())
            key_file.chmod(0o600)
        SECRET_KEY = key_file.read_text().strip()
    else:
        # A plain message and exit status 1, not a traceback: this is an operator's mistake.
        sys.exit(
            "Agent Codex refuses to start: SECRET_KEY is not set. Set the SECRET_KEY environment "
            "variable to a long random value, or set DJANGO_DEBUG=1 for local development."
        )

# The public base URL of this server: the MCP resource is <base>/mcp, the OAuth issuer <base>/o.
CODEX_PUBLIC_URL = os.environ.get("CODEX_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
_public = urlsplit(CODEX_PUBLIC_URL)
if _public.scheme not in {"http", "https"} or not _public.netloc or _public.path not in {"", "/"}:
    sys.exit(
        "Agent Codex refuses to start: CODEX_PUBLIC_URL must be an origin like "
        f"https://codex.example.com, not {CODEX_PUBLIC_URL!r}"
    )
CODEX_RESOURCE_URL = CODEX_PUBLIC_URL + "/mcp"
CODEX_ISSUER_URL = CODEX_PUBLIC_URL + "/o"

ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", [_public.hostname or "127.0.0.1", "127.0.0.1", "localhost", "[::1]"])
# Origins a browser-based MCP client may call /mcp from; requests without Origin are not browsers.
CODEX_ALLOWED_ORIGINS = envlist("CODEX_ALLOWED_ORIGINS", [CODEX_PUBLIC_URL])
CSRF_TRUSTED_ORIGINS = [CODEX_PUBLIC_URL]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "oauth2_provider",
    "authserver",
    "notebook",
    "mcp_endpoint",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, so it sees the view's exceptions first: a database outage is a 503, one log line.
    "codex_site.middleware.DatabaseUnavailableMiddleware",
]

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

ASGI_APPLICATION = "codex_site.asgi.application"

# SQLite by default: embedded, WAL so readers never wait for the writer, IMMEDIATE
# transactions and a busy timeout so concurrent writers queue instead of failing
# with "database is locked".
SQLITE_PATH = Path(os.environ.get("CODEX_SQLITE_PATH", VAR_DIR / "codex.sqlite3"))
# Worker threads keep their connection between requests for this many seconds (Django's
# persistent connections, health-checked before reuse). Tests use 0: a connection left open
# in a server thread would keep PostgreSQL from dropping the test database.
CONN_MAX_AGE = envint("CODEX_CONN_MAX_AGE", 0 if TESTING else 60)
if os.environ.get("DATABASE_URL"):
    DATABASES = {
        "default": dj_database_url.parse(os.environ["DATABASE_URL"], conn_max_age=CONN_MAX_AGE, conn_health_checks=True)
    }
else:
    SQLITE_PATH.parent.mkdir(parents=True, exist_ok=True)
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

SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
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
if TESTING:
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

LOGIN_URL = "/accounts/login/"

# Production hardening that only makes sense behind HTTPS.
if _public.scheme == "https":
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Rate limits per client address: dynamic client registrations per hour, and sign-ins
# that make the server fetch a new client's metadata document per 10 minutes.
CODEX_DCR_RATE_LIMIT = envint("CODEX_DCR_RATE_LIMIT", 20)
CODEX_CIMD_RATE_LIMIT = envint("CODEX_CIMD_RATE_LIMIT", 30)
# Quotas (contract 6, resource_exhausted): tool calls per access token per minute, shared
# by every worker through the database cache; entries and stored bytes (every revision
# counted) per codex, kept in the codex row.
CODEX_TOOL_CALLS_PER_MINUTE = envint("CODEX_TOOL_CALLS_PER_MINUTE", 600)
CODEX_QUOTA_ENTRIES = envint("CODEX_QUOTA_ENTRIES", 1_000_000)
CODEX_QUOTA_STORED_BYTES = envint("CODEX_QUOTA_STORED_BYTES", 5 * 1024**3)
# Client ID Metadata Documents on loopback addresses (a local client, a test): debug/tests only.
CODEX_CIMD_ALLOW_LOOPBACK = envbool("CODEX_CIMD_ALLOW_LOOPBACK", DEBUG or TESTING)


def oauth2_provider_settings(public_url: str) -> dict:
    """django-oauth-toolkit as this server's OAuth 2.1 authorization server, issuer <public_url>/o.

    A function of the public URL so tests that serve on an ephemeral port can rebuild it.
    """
    return {
        "SCOPES": {"notes:read": "Read your notes", "notes:write": "Write your notes"},
        "DEFAULT_SCOPES": ["notes:read"],
        "ACCESS_TOKEN_EXPIRE_SECONDS": envint("CODEX_ACCESS_TOKEN_SECONDS", 3600),
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
        "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
        "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
        # RFC 8707: every grant and token is bound to <public_url>/mcp.
        "OAUTH2_VALIDATOR_CLASS": "authserver.validators.CodexOAuth2Validator",
        # Dynamic Client Registration (RFC 7591) for clients that do not use metadata documents.
        "DCR_ENABLED": True,
        "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
        "DCR_REGISTRATION_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,
        # Client ID Metadata Documents (preferred by MCP 2026-07-28).
        "CIMD_ENABLED": True,
        "CIMD_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.cimd.HostAllowlistCIMDPermission",),
        "CIMD_ALLOWED_HOSTS": envlist("CODEX_CIMD_ALLOWED_HOSTS", ["*"]),
        "CIMD_METADATA_FETCHER": "authserver.cimd.CodexMetadataFetcher",
        # Always ask the person; never approve silently.
        "REQUEST_APPROVAL_PROMPT": "force",
    }


OAUTH2_PROVIDER = oauth2_provider_settings(CODEX_PUBLIC_URL)

CACHES = {
    # Shared by every worker process: rate-limit counters and DOT's fetch backoff.
    "default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "codex_cache"}
}

LOGIN_REDIRECT_URL = "/account/clients/"
LOGOUT_REDIRECT_URL = "/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("CODEX_LOG_LEVEL", "WARNING" if TESTING else "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        # The stateless transport logs every request's teardown at INFO.
        "mcp.server.streamable_http": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        # Refusals are the point of many tests; their 4xx log lines are noise there.
        "django.request": {"level": "ERROR" if TESTING else "WARNING"},
        "django.security": {"level": "ERROR" if TESTING else "WARNING"},
    },
}
