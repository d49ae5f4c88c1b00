"""Error answers a person can act on: pages in the site's style that say what happened and
what to do, for 400, 403, 404, 500 and a failed CSRF check (``CSRF_FAILURE_VIEW``). Paths
that programs call (the OAuth endpoints but the authorization page, ``/.well-known/``,
``/healthz``) answer JSON instead, as their own errors do. (``/mcp`` is not Django's.)

Django shows its own debug pages when ``DEBUG`` is on, which is how ``make run`` serves; a
person trying the product then met the yellow "Page not found" and "CSRF verification
failed" pages. So ``ErrorPagesMiddleware`` gives those people this module's 400, 403 and 404
pages in debug too (a URL that matched nothing, and a view's ``Http404``, ``PermissionDenied``
or ``BadRequest``). An unhandled exception keeps Django's traceback page in debug, which is
what the person developing needs; without debug it is this module's 500 page.

The pages are rendered without the request's context processors (an error page must not
fail itself, nor use up the messages meant for the next page), but with the site's header
like every page: who is signed in, if the server can tell (``signed_in``), and the token
its sign-out form needs. A 404 must not look signed out.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string

AUTHORIZATION_PAGE = "/o/authorize/"
API_PREFIXES = ("/o/", "/.well-known/", "/healthz", "/mcp", "/scim/")

PAGES: dict[int, dict[str, str]] = {
    400: {
        "title": "Bad request",
        "heading": "This request could not be understood",
        "explanation": "The address or the form sent to this page was not in a form the server reads.",
        "action": "Go back and try again, or start from the home page.",
    },
    403: {
        "title": "Not allowed",
        "heading": "You are not allowed to see this page",
        "explanation": "Your account does not have access to it.",
        "action": "Sign in with another account, or start from the home page.",
    },
    404: {
        "title": "Page not found",
        "heading": "This page does not exist",
        "explanation": "The address may be mistyped, or what it showed was deleted (a note deleted from "
        "your notebook is gone for good).",
        "action": "Your notes are in My notebook.",
    },
    500: {
        "title": "Server error",
        "heading": "Something went wrong on the server",
        "explanation": "The server could not finish this request. Nothing you did caused it, and it has been logged.",
        "action": "Wait a moment and try again; if it keeps happening, tell whoever runs this server.",
    },
}

CSRF_CONSENT = {
    "title": "This page expired",
    "heading": "This page expired",
    "explanation": "The approval page was opened before you signed out or in again (perhaps in "
    "another tab), so its answer cannot be trusted: nothing was approved.",
    "action": "This page expired: go back to the application and connect again; it brings you to a new approval page.",
}
CSRF_FORM = {
    "title": "This page expired",
    "heading": "This page expired",
    "explanation": "The form was opened before you signed out or in again (perhaps in another "
    "tab), or your browser refused the site's cookie, so nothing was changed.",
    "action": "Go back, reload the page and send the form again.",
}


def is_api(request: HttpRequest) -> bool:
    path = request.path
    return path.startswith(API_PREFIXES) and not path.startswith(AUTHORIZATION_PAGE)


def signed_in(request: HttpRequest) -> dict[str, Any]:
    """The header's context: the signed-in user, or ``who_unknown`` when the server cannot tell
    (a 500 from a database that cannot be read: the user's lookup fails too). Never raises."""
    try:
        user = request.user  # AuthenticationMiddleware's lazy user: the session, then the user
        user.is_authenticated  # noqa: B018  (loads it here, where a failure is caught)
    except Exception:  # whatever broke the request may break this too
        return {"who_unknown": True}
    return {"user": user, "csrf_token": get_token(request)}


def _answer(request: HttpRequest, status: int, words: dict[str, str], error: str) -> HttpResponse:
    if is_api(request):
        return JsonResponse({"error": error, "error_description": words["heading"]}, status=status)
    html = render_to_string("error.html", {**words, "status": status, **signed_in(request)})
    return HttpResponse(html, status=status, content_type="text/html; charset=utf-8")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _answer(request, 400, PAGES[400], "invalid_request")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _answer(request, 403, PAGES[403], "forbidden")


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    return _answer(request, 404, PAGES[404], "not_found")


def server_error(request: HttpRequest) -> HttpResponse:
    return _answer(request, 500, PAGES[500], "server_error")


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form posted with a stale or missing CSRF token."""
    words = CSRF_CONSENT if request.path.startswith(AUTHORIZATION_PAGE) else CSRF_FORM
    return _answer(request, 403, words, "forbidden")


_HANDLERS: list[tuple[type[Exception] | tuple[type[Exception], ...], Callable[..., HttpResponse]]] = [
    (Http404, page_not_found),
    (PermissionDenied, permission_denied),
    ((BadRequest, SuspiciousOperation), bad_request),
]


class ErrorPagesMiddleware:
    """In debug, the site's 400/403/404 pages instead of Django's debug pages (without debug,
    Django calls the handlers in ``codex_site.urls`` itself)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # A URL that matched nothing never reaches a view, so process_exception cannot see it.
        if settings.DEBUG and response.status_code == 404 and getattr(request, "resolver_match", None) is None:
            return page_not_found(request)
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not settings.DEBUG:
            return None
        for kinds, handler in _HANDLERS:
            if isinstance(exception, kinds):
                return handler(request, exception)
        return None
