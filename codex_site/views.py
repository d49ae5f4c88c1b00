"""The site's own small pages: home, health check, and a JSON 404."""

import logging
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from codex_site.middleware import unavailable_response
from common.outage import UNAVAILABLE_ERRORS, log_database_unavailable

logger = logging.getLogger(__name__)


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"mcp_url": settings.CODEX_RESOURCE_URL})


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
