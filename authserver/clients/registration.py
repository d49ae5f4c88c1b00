"""Guards in front of DOT's Dynamic Client Registration endpoints (RFC 7591/7592).

DOT parses registration bodies with ``json.loads``, which raises ``RecursionError``
(an HTTP 500) on a deeply nested body and lets a ``\\u`` escape of a lone surrogate
through to the database (a 500 again). The body must be sent as JSON (RFC 7591), and is
read first as any stranger's JSON is (``common.inputs.json_document``), which refuses both in
words. The members DOT stores are checked here: ``client_name`` by the name rule
(``common.inputs.name_problem``: a string, since ``null`` reached a NOT NULL column, of at most
255 characters, none of which changes how the name is shown), and the redirect URIs by the one
redirect-URI rule (``authserver.clients.redirect_uris``), which answers ``invalid_redirect_uri``
naming the URI and why (RFC 7591 §3.2.2).

This server serves a registered client the authorization-code and refresh-token grants only. A
registration asking for others as well (VS Code asks for the device-code grant too) is registered
with those two, and its answer says so, as RFC 7591 §3.2.1 lets a server do: DOT is handed the
metadata with the grant types this server registers (``registered_grant_types``, which metadata
documents go through too). One asking for no authorization code could never get a token, and is
refused.

Every answer of both endpoints is marked ``Cache-Control: no-store`` (and ``Pragma:
no-cache``): a registration answer carries the ``registration_access_token`` that manages
the client, and RFC 6749 §5.1 asks that no response with a token be cached.

A flood of registrations is bounded by what it leaves behind (``PendingRegistration``): a
registration no person has approved (a dynamic one, or an application made from a metadata
document, ``authserver.clients.cimd``) waits at most ``CODEX_DCR_PENDING_SECONDS`` and is then removed
with everything of it (``expire_pending``, run before each registration and by ``manage.py
codex_expire_registrations``). A client network (``common.ratelimit.network_of``: an IPv6
address's /64) with ``CODEX_DCR_PENDING_PER_ADDRESS`` of them waiting must wait for one to be
approved or to expire (``pending_refusal``). The server as a whole holds at most
``CODEX_DCR_PENDING_MAX``: past it, the oldest waiting ones make room (``make_room``), so a flood
from many networks costs the oldest unapproved registrations their wait, and never refuses a new
registration for everyone. A hosted client that registers for every person it connects, each
followed by a sign-in, holds only the registrations of the last few minutes.

Who claims a waiting registration first wins, by deleting its row under its lock: the
person's approval (``claim_on_approval``, in the same transaction as the grant it saves), or
the expiry, which deletes the Application with the row. So an approval never saves a grant of
a client that the expiry is removing, and the expiry never removes a client just approved.
"""

import datetime as dt
import json
from typing import Any

from django.conf import settings
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.models import get_application_model
from oauth2_provider.views.dynamic_client_registration import DynamicClientRegistrationManagementView

from authserver.clients.redirect_uris import RedirectURIRefused, redirect_uris_check
from authserver.core import policy
from authserver.core.answers import never_cached, oauth_error
from authserver.models import ClientKeys, PendingRegistration
from common.inputs import JSONRefused, json_document, name_problem, shown

# The grants a registered client is served, in the order a registration's answer lists them.
REGISTERED_GRANT_TYPES = ("authorization_code", "refresh_token")
# DOT's Application.name column.
CLIENT_NAME_MAX_CHARS = 255
# DOT's default when a registration names no method: a confidential client with a secret.
DEFAULT_AUTH_METHOD = "client_secret_basic"
# Waiting registrations removed by one expiry run: a registration's own wait stays short, and
# a few runs clear the most that can wait (CODEX_DCR_PENDING_MAX).
EXPIRED_PER_RUN = 200


def _invalid_metadata(description: str) -> JsonResponse:
    return oauth_error("invalid_client_metadata", description)


def _invalid_redirect_uri(refused: RedirectURIRefused) -> JsonResponse:
    subject = "redirect_uris" if refused.index is None else f"redirect_uris[{refused.index}]"
    if uri := refused.shown_uri():
        subject += f" ({uri})"
    description = f"{subject}: {refused.problem}; {refused.fix}"
    return oauth_error(refused.code, description)


def _is_json(content_type: str) -> bool:
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


class GrantTypesRefused(Exception):
    """Grant types no client registered here could get a token with; the words say which to ask for."""


def registered_grant_types(requested: object) -> list[str]:
    """The grant types a client asking for ``requested`` is registered with: those of them this
    server serves a registered client (``REGISTERED_GRANT_TYPES``). Raises ``GrantTypesRefused``
    when ``requested`` is not a list of texts, or holds no ``authorization_code``."""
    if not isinstance(requested, list) or not all(isinstance(grant, str) for grant in requested):
        raise GrantTypesRefused('"grant_types" must be a list of texts')
    if "authorization_code" not in requested:
        raise GrantTypesRefused(
            '"grant_types" must include "authorization_code": this server registers clients for the '
            'authorization code grant (and "refresh_token") only'
        )
    return [grant for grant in REGISTERED_GRANT_TYPES if grant in requested]


def registration_body_problem(request: HttpRequest) -> JsonResponse | None:
    """A 400 for a body DOT must not see (not JSON, too deeply nested, no authorization code, a
    redirect URI the rule refuses), or None: DOT then reads the metadata with the grant types this
    server registers (RFC 7591 §3.2.1)."""
    if request.method not in {"POST", "PUT"}:
        return None
    # RFC 7591 §3.1: the metadata is sent as application/json. Anything else is refused before
    # the body is read: a form type's body may already have been parsed (and, for multipart,
    # consumed) by the middleware that looks into forms, so that it could not be read again.
    if not _is_json(request.content_type or ""):
        named = shown(request.content_type or "", max_chars=60) if request.content_type else "none"
        return _invalid_metadata(f"Send the client metadata as JSON, with Content-Type: application/json (not {named})")
    try:
        data = json_document(request.body)
    except JSONRefused as refused:
        return _invalid_metadata(f"The request body cannot be read: {refused.problem}")
    if not isinstance(data, dict):
        return None  # DOT answers that itself
    grant_types = data.get("grant_types")
    if "grant_types" in data:
        try:
            grant_types = registered_grant_types(data["grant_types"])
        except GrantTypesRefused as refused:
            return _invalid_metadata(str(refused))
    if "client_name" in data and (
        problem := name_problem(data["client_name"], max_chars=CLIENT_NAME_MAX_CHARS, what="client_name")
    ):
        return _invalid_metadata(problem + " (omit it for no name)")
    if isinstance(redirect_uris := data.get("redirect_uris", []), list):
        public = data.get("token_endpoint_auth_method", DEFAULT_AUTH_METHOD) == "none"
        try:
            redirect_uris_check(redirect_uris, public=public)
        except RedirectURIRefused as refused:
            return _invalid_redirect_uri(refused)
    if grant_types != data.get("grant_types"):
        # DOT's view reads the metadata from the body alone (registered in common.internals).
        request._body = json.dumps({**data, "grant_types": grant_types}).encode()
    return None


def refused_by_policy(reason: str) -> JsonResponse:
    """The answer, and the audit line, of a registration (or an update of one) while the
    operator's policy has Dynamic Client Registration off."""
    policy.refused(policy.DYNAMIC_REGISTRATION, reason=reason)
    return oauth_error("access_denied", policy.DCR_REFUSAL, status=403)


class NeverCachedMixin:
    """Marks every answer of a registration endpoint as not to be stored by any cache.

    DOT's registration views are CSRF-exempt API endpoints (bearer or no credentials, never
    a cookie); Django reads that mark from the class's own ``dispatch``, so it is kept here."""

    @method_decorator(csrf_exempt)
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return never_cached(super().dispatch(request, *args, **kwargs))


class GuardedRegistrationManagementView(NeverCachedMixin, DynamicClientRegistrationManagementView):
    """RFC 7592 client configuration (read, update, delete) with the body guard above.

    With registration off by the operator's policy, an update is refused as a registration is:
    it could give an earlier registration new redirect URIs, a new client under an old name.
    Reading and removing a registration stay open to its holder. The refusal comes before the
    registration token is checked, so its audit line names no client (the path's id is unproven)."""

    @method_decorator(csrf_exempt)
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.method == "PUT" and not policy.dcr_enabled():
            return never_cached(refused_by_policy("dynamic client registration is off: update refused"))
        if problem := registration_body_problem(request):
            return never_cached(problem)
        return super().dispatch(request, *args, **kwargs)


# --- registrations no person has approved yet -------------------------------------------------


def _pending_cutoff(now: dt.datetime) -> dt.datetime:
    return now - dt.timedelta(seconds=settings.CODEX_DCR_PENDING_SECONDS)


def _remove(application_ids: list[int]) -> None:
    """Remove waiting registrations' applications (their rows and tokens go with them), and the
    keys their documents declared."""
    Application = get_application_model()
    client_ids = list(Application.objects.filter(pk__in=application_ids).values_list("client_id", flat=True))
    Application.objects.filter(pk__in=application_ids).delete()
    ClientKeys.objects.filter(client_id__in=client_ids).delete()


def expire_pending(*, now: dt.datetime | None = None, limit: int = EXPIRED_PER_RUN) -> int:
    """Remove up to ``limit`` registrations that waited longer than CODEX_DCR_PENDING_SECONDS
    for an approval: their Applications, registration tokens and rows. Returns how many."""
    cutoff = _pending_cutoff(now or timezone.now())
    with transaction.atomic():
        # Rows an approval holds are skipped: that approval claims them (claim_on_approval).
        expired = list(
            PendingRegistration.objects.select_for_update(skip_locked=True)
            .filter(registered_at__lt=cutoff)
            .order_by("registered_at")
            .values_list("application_id", flat=True)[:limit]
        )
        if expired:
            _remove(expired)
    return len(expired)


def make_room(*, now: dt.datetime | None = None) -> int:
    """Past CODEX_DCR_PENDING_MAX waiting registrations, remove the oldest until the server holds
    that many again (the newest, just made, stays). Returns how many were removed."""
    cutoff = _pending_cutoff(now or timezone.now())
    with transaction.atomic():
        waiting = PendingRegistration.objects.filter(registered_at__gte=cutoff)
        excess = waiting.count() - settings.CODEX_DCR_PENDING_MAX
        if excess <= 0:
            return 0
        oldest = list(
            waiting.select_for_update(skip_locked=True)
            .order_by("registered_at", "pk")
            .values_list("application_id", flat=True)[:excess]
        )
        _remove(oldest)
    return len(oldest)


def pending_refusal(network: str, *, now: dt.datetime | None = None) -> tuple[str, int] | None:
    """Why a registration from ``network`` must wait, and how many seconds, or None."""
    now = now or timezone.now()
    waiting = PendingRegistration.objects.filter(address=network, registered_at__gte=_pending_cutoff(now))
    limit = settings.CODEX_DCR_PENDING_PER_ADDRESS
    if waiting.count() < limit:
        return None
    oldest = waiting.order_by("registered_at").values_list("registered_at", flat=True).first()
    seconds = settings.CODEX_DCR_PENDING_SECONDS - int((now - oldest).total_seconds()) if oldest else 1
    return (
        f"{limit} client registrations from this network are waiting for a person to approve them; each is "
        f"removed {settings.CODEX_DCR_PENDING_SECONDS // 60} minutes after it was made unless approved, "
        "so retry after the Retry-After interval",
        max(1, seconds),
    )


def record_pending(application: Any, network: str) -> None:
    """Remember that ``application`` was just registered (or made from its document) by a client
    of ``network`` and waits for an approval; then make room under the server's cap."""
    PendingRegistration.objects.create(application=application, address=network, registered_at=timezone.now())
    make_room()


class RegistrationExpired(Exception):
    """The client's registration waited too long for an approval and is being removed."""


def claim_on_approval(application: object) -> None:
    """The person approves ``application``: if its registration was waiting, it is theirs now.

    Called inside the transaction that saves the grant. Raises ``RegistrationExpired`` when
    the expiry removed (or is removing) it first."""
    pending = PendingRegistration.objects.select_for_update().filter(application=application).first()
    if pending is not None:
        if pending.registered_at < _pending_cutoff(timezone.now()):
            raise RegistrationExpired()  # the next expiry removes it
        pending.delete()
    elif not get_application_model().objects.filter(pk=getattr(application, "pk", None)).exists():
        raise RegistrationExpired()  # the expiry's transaction removed it while we waited for its row
