"""The answers of the OAuth endpoints (RFC 6749 §5.1-5.2): JSON, and never stored by a cache.

``never_cached`` marks any answer of an OAuth endpoint (``Cache-Control: no-store`` and, for
HTTP/1.0 caches, ``Pragma: no-cache``: an answer may carry a token, a registration's secret or
what introspection says of someone's token), and ``oauth_error`` is the one way this server
writes an OAuth error of its own: ``{"error": ..., "error_description": ...}`` with a status,
never stored. The endpoints' own refusals (a parameter, an origin, a rate limit, a registration,
a grant raced by a revocation) all come through it, so that none forgets either part.
"""

from collections.abc import Mapping

from django.http import HttpResponse, JsonResponse


def never_cached(response: HttpResponse) -> HttpResponse:
    """``response``, marked so that no cache keeps it."""
    response["Cache-Control"] = "no-store"
    response["Pragma"] = "no-cache"
    return response


def oauth_error(
    error: str, description: str, *, status: int = 400, headers: Mapping[str, str] | None = None
) -> JsonResponse:
    """An OAuth error answer: ``error`` (an RFC 6749 §5.2 code, or an extension's) and words a
    client's author can act on."""
    response = JsonResponse({"error": error, "error_description": description}, status=status, headers=headers)
    return never_cached(response)  # type: ignore[return-value]
