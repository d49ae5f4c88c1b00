"""CORS on the OAuth endpoints a browser-based client calls: CODEX_ALLOWED_ORIGINS, by the rule
/mcp uses (``common.origins.origin_allowed``), and 403 for any other origin, as /mcp answers.

The CORS paths are ``CORS_URLS_REGEX``: token, registration, revocation and the metadata (never
the sign-in, consent or admin pages, whose forms CSRF guards). ``OriginGuardMiddleware``, just
before django-cors-headers' middleware, answers a request there whose ``Origin`` is not allowed,
a preflight or the request itself, with 403 before anything else runs: such a request was
otherwise served (a registration made, a code exchanged), and only its answer went unread by
the page. A request without ``Origin`` (a native or server-side client) passes as before.

django-cors-headers asks its ``check_request_enabled`` signal about origins not in
``CORS_ALLOWED_ORIGINS`` (empty here). A truthy answer also turns CORS on for the
request's URL, so this answers only for the CORS paths.
"""

import logging
import re
from collections.abc import Callable
from typing import Any

from corsheaders.signals import check_request_enabled
from django.conf import settings
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

from authserver.core.answers import oauth_error
from common.origins import origin_allowed

logger = logging.getLogger(__name__)

REFUSAL = {
    "error": "origin_not_allowed",
    "error_description": "A browser page may call this server only from an origin its operator allows",
}


def cors_path(request: HttpRequest) -> bool:
    """Whether the request is for one of the OAuth endpoints a browser-based client calls."""
    return bool(re.match(settings.CORS_URLS_REGEX, request.path_info))


@receiver(check_request_enabled)
def allow_configured_origins(sender: Any, request: HttpRequest, **kwargs: Any) -> bool:
    return cors_path(request) and origin_allowed(request.headers.get("origin"))


class OriginGuardMiddleware:
    """403 for a request to a CORS path whose ``Origin`` is not allowed (an empty one and
    ``null`` included), preflight or not; no CORS headers on it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        origin = request.headers.get("origin")
        if origin is not None and cors_path(request) and not origin_allowed(origin):
            logger.info("refused a request from origin %r on %s", origin[:100], request.path[:200])
            return oauth_error(REFUSAL["error"], REFUSAL["error_description"], status=403)
        return self.get_response(request)
