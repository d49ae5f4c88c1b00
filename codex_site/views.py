"""The site's own small pages: home, health check, and a JSON 404."""

from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html", {"mcp_url": settings.CODEX_RESOURCE_URL})


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness plus a database round trip, for load balancers and the README."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    return JsonResponse({"error": "not_found"}, status=404)
