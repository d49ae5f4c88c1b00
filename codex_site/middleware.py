"""Site-wide middleware."""

import logging
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.http import parse_header_parameters

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


FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data"})
FORM_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


class FormCharsetMiddleware:
    """A form body that declares a charset other than UTF-8 gets 415 before anything reads it.

    Django refuses such an urlencoded body with ``BadRequest`` only when ``request.POST``
    is first read, and reads it again while handling that error (its CSRF check runs for
    the 400 page too), so the refusal escaped as "Exception in ASGI application". A
    browser never sends a charset on a form; UTF-8 (or its ASCII subset) is the only one
    the pages and the OAuth endpoints read."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        content_type, params = parse_header_parameters(request.META.get("CONTENT_TYPE", ""))
        charset = params.get("charset")
        if content_type in FORM_TYPES and charset is not None and charset.lower() not in FORM_CHARSETS:
            logger.info("refused a %s body in charset %r on %s", content_type, charset[:40], request.path[:200])
            return HttpResponse("Form bodies must be UTF-8.\n", status=415, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
