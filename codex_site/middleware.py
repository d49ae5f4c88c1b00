"""Site-wide middleware."""

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from common.outage import UNAVAILABLE_ERRORS, log_database_unavailable

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5


def unavailable_response(body: dict[str, str] | None = None) -> JsonResponse:
    if body is None:
        body = {"error": "unavailable", "error_description": "The database is unreachable; retry shortly"}
    response = JsonResponse(body, status=503)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    response["Cache-Control"] = "no-store"
    # The refusal was logged in one line already; Django would log every 5xx again at ERROR.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


class DatabaseUnavailableMiddleware:
    """A page or OAuth endpoint that cannot reach the database answers 503 with one log
    line, not a 500 with a traceback per request (see ``common.outage``)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, UNAVAILABLE_ERRORS):
            log_database_unavailable(logger, f"{request.method} {request.path[:200]}", exception)
            return unavailable_response()
        return None
