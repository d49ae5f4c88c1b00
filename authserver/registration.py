"""Guards in front of DOT's Dynamic Client Registration endpoints (RFC 7591/7592).

DOT parses registration bodies with ``json.loads``, which raises ``RecursionError``
(an HTTP 500) on a deeply nested body. The body is checked first with the parser the
MCP SDK uses, which refuses such nesting with a plain error. And since this server
serves only the authorization-code and refresh-token grants, a registration asking
for any other grant is refused here rather than creating a client that could never
get a token.
"""

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from oauth2_provider.views.dynamic_client_registration import DynamicClientRegistrationManagementView
from pydantic_core import from_json

ADVERTISED_GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})


def _invalid_metadata(description: str) -> JsonResponse:
    return JsonResponse({"error": "invalid_client_metadata", "error_description": description}, status=400)


def registration_body_problem(request: HttpRequest) -> JsonResponse | None:
    """A 400 for a body DOT must not see (too deeply nested, or asking for other grants)."""
    if request.method not in {"POST", "PUT"}:
        return None
    try:
        data = from_json(request.body)
    except ValueError as error:
        if "recursion limit" in str(error):
            return _invalid_metadata("Request body is nested too deeply")
        return None  # DOT answers other malformed bodies itself
    if isinstance(data, dict):
        grant_types = data.get("grant_types")
        if isinstance(grant_types, list) and not set(map(str, grant_types)) <= ADVERTISED_GRANT_TYPES:
            return _invalid_metadata("grant_types may contain only authorization_code and refresh_token")
    return None


class GuardedRegistrationManagementView(DynamicClientRegistrationManagementView):
    """RFC 7592 client configuration (read, update, delete) with the body guard above."""

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if problem := registration_body_problem(request):
            return problem
        return super().dispatch(request, *args, **kwargs)
