"""``/scim/v2/``: SCIM 2.0 (RFC 7643, RFC 7644) for the organizations' identity providers.

scim2-server serves the protocol (routing, validation of every body against the published
schema, PATCH, filters' parsing, ETags, the error bodies); this module hands it Django's request
and the organization the bearer credential names, and gives back its answer. Its storage
(``PeopleStorage``) holds only that organization's people.

- Every endpoint but ``/ServiceProviderConfig`` (RFC 7643 §5) needs the credential; a missing or
  wrong one is a SCIM ``401`` (with ``WWW-Authenticate``), after one indexed lookup, and one
  ``scim.refused`` audit line.
- Bodies are bounded by the site's limit (``CODEX_BODY_MAX_BYTES``, before Django reads them);
  a filter's text by ``MAX_FILTER_CHARACTERS`` before it is parsed.
- Any failure is a SCIM error body: a client's as its status and ``scimType``, anything else as
  a 500 without detail (logged with its traceback), never Django's page.
"""

import json
import logging
from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from scim2_models import InvalidFilterException, SCIMException, UnauthorizedException
from scim2_server.applications.base import BaseApplication
from scim2_server.handler import ScimHandler
from scim2_server.requests import ScimRequest
from scim2_server.responses import ScimResponse
from scim2_server.service import ScimService

from authserver.enterprise.scim import credentials
from authserver.enterprise.scim.schema import MAX_FILTER_CHARACTERS, provider
from authserver.enterprise.scim.storage import PeopleStorage
from common.audit import audit

logger = logging.getLogger(__name__)

PREFIX = "/scim/v2"


class CodexScimService(ScimService):
    def read_search(self, resource_types: Any, payload: Any) -> Any:
        # Bounded before the parser sees it (a query string or a .search body).
        if isinstance(payload, dict):
            for key, value in payload.items():
                if key.casefold() == "filter" and isinstance(value, str) and len(value) > MAX_FILTER_CHARACTERS:
                    raise InvalidFilterException(detail=f"A filter is at most {MAX_FILTER_CHARACTERS} characters")
        return super().read_search(resource_types, payload)


class CodexScimApplication(BaseApplication):
    def handle_exception(self, request: ScimRequest, exception: Exception) -> ScimResponse:
        if isinstance(exception, SCIMException):
            # The client's mistake: its status and type, not its detail (which may quote the input).
            logger.info(
                "SCIM %s %s refused: %s %s",
                request.method,
                request.path[:200],
                exception.status,
                getattr(exception, "scim_type", None) or "",
            )
        else:
            logger.error("SCIM %s %s failed", request.method, request.path[:200], exc_info=exception)
        return self.service.error_response(exception)


@cache
def application() -> CodexScimApplication:
    scim_provider = provider(ignore_unknown=settings.CODEX_SCIM_IGNORE_UNKNOWN)
    return CodexScimApplication(scim_provider, CodexScimService(scim_provider))


def _answer(response: ScimResponse) -> HttpResponse:
    body = b"" if response.body is None else json.dumps(response.body).encode()
    answer = HttpResponse(body, status=response.status.value)
    for name, value in response.headers.items():
        answer[name] = value
    # Logged once already (``handle_exception``): a 501 is the client's ask for what is not
    # served, and a 500 was logged with its traceback; Django would log either again at ERROR.
    answer._has_been_logged = True  # type: ignore[attr-defined]
    return answer


@csrf_exempt
def scim(request: HttpRequest, path: str | None = None) -> HttpResponse:
    app = application()
    scim_request = ScimRequest(
        method=request.method or "GET",
        base_url=f"{settings.CODEX_PUBLIC_URL}{PREFIX}",
        path=path or "",
        query=dict(request.GET.items()),
        headers=list(request.headers.items()),
        body=request.body,
    )
    try:
        organization = None
        if app.needs_auth(scim_request):
            authorization = request.headers.get("Authorization")
            organization = credentials.organization_for(authorization)
            if organization is None:
                # One audit line per refused credential (never the credential): an IdP whose
                # credential was revoked, or someone guessing, shows in the audit log.
                audit("scim.refused", reason="wrong" if authorization else "missing")
                raise UnauthorizedException(
                    detail="A valid organization credential is required (Authorization: Bearer)"
                )
        response = ScimHandler(app.service, PeopleStorage(organization)).handle(scim_request)  # type: ignore[arg-type]
    except Exception as error:
        response = app.handle_exception(scim_request, error)
    return _answer(app.finalize_response(scim_request, response))
