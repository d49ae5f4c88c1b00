"""Start-up refusals: a configuration an operator got wrong stops the process with one
plain line, not a traceback.

Settings only read the environment; the checks run where a process starts: as a
Django system check for management commands (``manage.py`` turns the refusal into a
line on stderr and exit status 1), and from ``codex_site.asgi`` for uvicorn. The test
runner sets its own key before the checks run, so ``manage.py test`` needs none.
"""

import sys
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import register
from django.core.exceptions import ImproperlyConfigured

from codex_metrics.exposition import parse_networks
from mcp_endpoint.identity import registry_name_problem


class RefusedToStart(ImproperlyConfigured):
    """The configuration cannot run; the message says what to set."""


def configuration_problem() -> str | None:
    try:
        has_key = bool(settings.SECRET_KEY)
    except ImproperlyConfigured:  # Django refuses to hand out an empty SECRET_KEY
        has_key = False
    if not has_key and not settings.DEBUG:
        return (
            "SECRET_KEY is not set. Set the SECRET_KEY environment variable to a long random value, "
            "or set DJANGO_DEBUG=1 for local development."
        )
    public = urlsplit(settings.CODEX_PUBLIC_URL)
    if public.scheme not in {"http", "https"} or not public.netloc or public.path not in {"", "/"}:
        return f"CODEX_PUBLIC_URL must be an origin like https://codex.example.com, not {settings.CODEX_PUBLIC_URL!r}"
    website = urlsplit(settings.CODEX_WEBSITE_URL)
    if settings.CODEX_WEBSITE_URL and (website.scheme not in {"http", "https"} or not website.netloc):
        return f"CODEX_WEBSITE_URL must be an http(s) URL like https://example.com/, not {settings.CODEX_WEBSITE_URL!r}"
    if settings.CODEX_REGISTRY_NAME and (problem := registry_name_problem(settings.CODEX_REGISTRY_NAME)):
        return f"CODEX_REGISTRY_NAME: {problem}"
    try:
        parse_networks(settings.CODEX_METRICS_ALLOW)
    except ValueError as error:
        return f"CODEX_METRICS_ALLOW: {error} (give comma-separated addresses or networks, or none)"
    if settings.CODEX_METRICS_TOKEN and len(settings.CODEX_METRICS_TOKEN) < 16:
        return "CODEX_METRICS_TOKEN is too short to be a secret: use at least 16 random characters"
    # The test runner serves its clients' documents on loopback with debug off; it says so.
    if settings.CODEX_CIMD_ALLOW_LOOPBACK and not settings.DEBUG and not getattr(settings, "CODEX_TEST_RUNNER", False):
        return (
            "CODEX_CIMD_ALLOW_LOOPBACK is on while DJANGO_DEBUG is off: this server would fetch client metadata "
            "documents and key sets from loopback addresses without checking their certificates. It is for "
            "development only (DJANGO_DEBUG=1); unset it in production"
        )
    # The operator's policy contradicted by the configuration (a token lifetime over the longest).
    from authserver.core import policy  # imported here: settings must be ready before DOT's are read

    return policy.configuration_problem()


@register()
def refuse_a_bad_configuration(app_configs, **kwargs) -> list:
    """Raised rather than reported: nothing should run on this configuration, not even with
    ``--skip-checks`` style leniency, and ``manage.py`` prints it as one line."""
    if problem := configuration_problem():
        raise RefusedToStart(problem)
    return []


def refuse_to_serve_a_bad_configuration() -> None:
    """For the ASGI entry point, where Django's system checks do not run."""
    if problem := configuration_problem():
        sys.exit(f"Agent Codex refuses to start: {problem}")
