"""The site's own small pages: home, health check, metrics, and a JSON 404."""

import logging
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.templatetags.static import static

import codex_metrics
from codex_metrics import exposition
from codex_site.middleware import unavailable_response
from common.inputs import bearer_credential
from common.outage import UNAVAILABLE_ERRORS, log_database_unavailable
from common.ratelimit import client_ip
from notebook import quotas

logger = logging.getLogger(__name__)


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"mcp_url": settings.CODEX_RESOURCE_URL})


def favicon(request: HttpRequest) -> HttpResponseRedirect:
    """``/favicon.ico``, which browsers and tools ask for whatever a page links: the site's
    icon (temporarily: its collected name changes with each release)."""
    response = HttpResponseRedirect(static("codex/icon.svg"))
    response["Cache-Control"] = "max-age=86400"
    return response


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


def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    return JsonResponse({"error": "not_found"}, status=404)


def _usage_totals() -> tuple[int, int, int] | None:
    try:
        return quotas.usage_totals()
    except UNAVAILABLE_ERRORS as error:
        # Not an "unavailable" answer: the scrape still answers, without these gauges.
        logger.warning("metrics: codex totals left out, the database is unavailable (%s)", type(error).__name__)
        return None


def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus scrape, for allowed addresses or the metrics token only; 404 for anyone else."""
    allowed = codex_metrics.enabled() and exposition.scrape_allowed(
        client=client_ip(request),
        presented=bearer_credential(request.headers.get("authorization")),
        networks=exposition.parse_networks(settings.CODEX_METRICS_ALLOW),
        token=settings.CODEX_METRICS_TOKEN,
    )
    if not allowed:
        raise Http404("no such page")
    body, content_type = exposition.scrape([exposition.UsageCollector(_usage_totals)])
    response = HttpResponse(body, content_type=content_type)
    response["Cache-Control"] = "no-store"
    return response
