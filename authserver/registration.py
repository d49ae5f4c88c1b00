"""Guards in front of DOT's Dynamic Client Registration endpoints (RFC 7591/7592).

DOT parses registration bodies with ``json.loads``, which raises ``RecursionError``
(an HTTP 500) on a deeply nested body and lets a ``\\u`` escape of a lone surrogate
through to the database (a 500 again). The body must be sent as JSON (RFC 7591), and is
checked first with the parser the MCP SDK uses, which refuses both with a plain error.
The members DOT stores are checked here as texts (``common.inputs``): ``client_name`` a
string (``null`` reached a NOT NULL column) of at most 255 characters without control
characters, each redirect URI a string without them. And since this server serves only the authorization-code and
refresh-token grants, a registration asking for any other grant is refused here rather
than creating a client that could never get a token.

Every answer of both endpoints is marked ``Cache-Control: no-store`` (and ``Pragma:
no-cache``): a registration answer carries the ``registration_access_token`` that manages
the client, and RFC 6749 §5.1 asks that no response with a token be cached.
"""

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.views.dynamic_client_registration import DynamicClientRegistrationManagementView
from pydantic_core import from_json

from common.inputs import shown, text_problem

ADVERTISED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})
# DOT's Application.name column.
CLIENT_NAME_MAX_CHARS = 255
REDIRECT_URI_MAX_CHARS = 2_048
REDIRECT_URIS_MAX_ITEMS = 32


def _invalid_metadata(description: str) -> JsonResponse:
    return JsonResponse({"error": "invalid_client_metadata", "error_description": description}, status=400)


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


def registration_body_problem(request: HttpRequest) -> JsonResponse | None:
    """A 400 for a body DOT must not see (not JSON, too deeply nested, or asking for other grants)."""
    if request.method not in {"POST", "PUT"}:
        return None
    # RFC 7591 §3.1: the metadata is sent as application/json. Anything else is refused before
    # the body is read: a form type's body may already have been parsed (and, for multipart,
    # consumed) by the middleware that looks into forms, so that it could not be read again.
    if not _is_json(request.content_type or ""):
        named = shown(request.content_type or "", max_chars=60) if request.content_type else "none"
        return _invalid_metadata(f"Send the client metadata as JSON, with Content-Type: application/json (not {named})")
    try:
        data = from_json(request.body, allow_inf_nan=False)
    except ValueError as error:
        if "recursion limit" in str(error):
            return _invalid_metadata("Request body is nested too deeply")
        return _invalid_metadata("Request body must be valid JSON in UTF-8 without lone surrogates")
    if not isinstance(data, dict):
        return None  # DOT answers that itself
    grant_types = data.get("grant_types")
    if isinstance(grant_types, list) and not set(map(str, grant_types)) <= ADVERTISED_GRANT_TYPES:
        return _invalid_metadata("grant_types may contain only authorization_code and refresh_token")
    if "client_name" in data and (
        problem := text_problem(data["client_name"], max_chars=CLIENT_NAME_MAX_CHARS, what="client_name")
    ):
        return _invalid_metadata(problem + " (omit it for no name)")
    redirect_uris = data.get("redirect_uris", [])
    if isinstance(redirect_uris, list):
        if len(redirect_uris) > REDIRECT_URIS_MAX_ITEMS:
            return _invalid_metadata(f"redirect_uris may hold at most {REDIRECT_URIS_MAX_ITEMS} URIs")
        for index, uri in enumerate(redirect_uris):
            if problem := text_problem(uri, max_chars=REDIRECT_URI_MAX_CHARS, what=f"redirect_uris[{index}]"):
                return _invalid_metadata(problem)
            if any(character.isspace() for character in uri):
                # DOT keeps the URIs in one space-separated column.
                return _invalid_metadata(f"redirect_uris[{index}] contains white space")
    return None


def never_cached(response: HttpResponse) -> HttpResponse:
    response["Cache-Control"] = "no-store"
    response["Pragma"] = "no-cache"
    return response


class NeverCachedMixin:
    """Marks every answer of a registration endpoint as not to be stored by any cache.

    DOT's registration views are CSRF-exempt API endpoints (bearer or no credentials, never
    a cookie); Django reads that mark from the class's own ``dispatch``, so it is kept here."""

    @method_decorator(csrf_exempt)
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return never_cached(super().dispatch(request, *args, **kwargs))


class GuardedRegistrationManagementView(NeverCachedMixin, DynamicClientRegistrationManagementView):
    """RFC 7592 client configuration (read, update, delete) with the body guard above."""

    @method_decorator(csrf_exempt)
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if problem := registration_body_problem(request):
            return never_cached(problem)
        return super().dispatch(request, *args, **kwargs)
