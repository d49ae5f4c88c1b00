"""Client ID Metadata Documents: when this server fetches one, what it accepts in one, and why it
refused one.

A document is fetched for a client this server does not know in exactly one place: the
authorization endpoint, under its per-network limit (``authserver.oauth.views``, ``fetch_new``). Every
other endpoint answers a client it does not know with ``invalid_client`` and fetches nothing
(``CodexOAuth2Validator._load_application``), so a stranger naming a thousand documents at the
token endpoint costs a thousand lookups of a row that is not there. A known client's copy past
its lifetime is fetched again wherever the client is loaded (``refresh_if_stale``), as DOT would.
DOT's own resolution (its backoff in the cache, its fetch slots) is never used.

The fetch is ``authserver.clients.fetching``'s (deadline, slots, request-forgery rules). The document is
checked here with reasons a person can pass on (``DocumentRefused``, whose words the error page
shows, ``authserver.oauth.refusals``). An application made from a document is a public client with no
secret (``authserver.signals``) and waits for a person's approval like a dynamic registration:
removed if nobody approves it in time (``authserver.clients.registration``). A document declaring
``private_key_jwt`` keeps its keys (``authserver.clients.assertions``), and the token endpoint asks
that client for an assertion (``authserver.oauth.validators``), so it is never served as a public client.
"""

import datetime as dt
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.cache import caches
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from oauth2_provider.cimd import CIMDError, is_cimd_client_id
from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings

from authserver.clients import assertions, registration
from authserver.clients.assertions import DocumentRefused
from authserver.clients.fetching import FetchBusy, HardenedFetcher, is_loopback
from authserver.clients.key_sets import cache_digest
from authserver.clients.redirect_uris import RedirectURIRefused, redirect_uris_check
from common.inputs import name_problem, shown

# The members that say how the client authenticates, which DOT's builder must not see.
_AUTHENTICATION_MEMBERS = ("token_endpoint_auth_method", "jwks_uri", "jwks", "token_endpoint_auth_signing_alg")
_DOCUMENT_FIX = (
    "serve the document at exactly this https address, publicly reachable, as JSON "
    f"(Content-Type application/json) of at most {oauth2_settings.CIMD_MAX_DOCUMENT_SIZE // 1024} KiB"
)


def refusal_hint(client_id: str) -> str | None:
    """Why a metadata document on a loopback address was refused, for the error page.

    DOT's fetcher refuses such addresses without saying so; a developer running a client
    locally against a server with debug off needs to know which setting decides.
    """
    if settings.CODEX_CIMD_ALLOW_LOOPBACK or not is_cimd_client_id(client_id):
        return None
    if not is_loopback(urlsplit(client_id).hostname):
        return None
    return (
        "This application's client ID is a metadata document on a loopback address "
        f"({urlsplit(client_id).netloc}). This server fetches metadata documents only from public "
        "addresses, except in development (DJANGO_DEBUG=1, or CODEX_CIMD_ALLOW_LOOPBACK=1, which must "
        "never be on in production). Serve the document from a public HTTPS address, or register "
        "the application with Dynamic Client Registration instead."
    )


# --- refusals, remembered while the document is not fetched again -------------------------------


def _notes():
    """The cache of notes a stranger's requests can make (never the security state's)."""
    return caches["notes"]


def _refusal_key(client_id: str) -> str:
    return "cimd-refusal:" + cache_digest(client_id)


def remembered_refusal(client_id: str) -> dict[str, str] | None:
    """What was wrong with the document the last time it was fetched, while it is not fetched again."""
    return _notes().get(_refusal_key(client_id))


def _remember_refusal(client_id: str, problem: str, fix: str) -> None:
    _notes().set(
        _refusal_key(client_id),
        {"problem": problem, "fix": fix},
        timeout=oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS,
    )


# --- the document ------------------------------------------------------------------------------


def _check_document(client_id: str, metadata: dict[str, Any]) -> assertions.Declaration:
    """The parts of a document DOT would refuse without a reason, checked with one."""
    if metadata.get("client_id") != client_id:
        raise DocumentRefused(
            'its "client_id" is not the address it was fetched from',
            f'set "client_id" to exactly {client_id}',
        )
    declaration = assertions.declared_keys(metadata)
    if "client_secret" in metadata or "client_secret_expires_at" in metadata:
        raise DocumentRefused(
            'it carries "client_secret", which a published document must never hold',
            'remove "client_secret" (and revoke that secret: it is public now)',
        )
    redirect_uris = metadata.get("redirect_uris")
    if not isinstance(redirect_uris, list) or not redirect_uris:
        raise DocumentRefused(
            'it lists no "redirect_uris"',
            'add "redirect_uris": the addresses the application receives its authorization codes at',
        )
    try:
        redirect_uris_check(redirect_uris, public=declaration.method == "none")
    except RedirectURIRefused as refused:
        named = f" ({refused.shown_uri()})" if refused.shown_uri() else ""
        problem = f'one of its "redirect_uris"{named} could not be used: {refused.problem}'
        raise DocumentRefused(problem, refused.fix) from None
    try:
        registration.registered_grant_types(metadata.get("grant_types", ["authorization_code"]))
    except registration.GrantTypesRefused as refused:
        raise DocumentRefused(
            f"its {refused}", 'declare "grant_types": ["authorization_code", "refresh_token"]'
        ) from None
    if problem := name_problem(
        metadata.get("client_name", ""), max_chars=registration.CLIENT_NAME_MAX_CHARS, what='its "client_name"'
    ):
        raise DocumentRefused(
            problem, 'make "client_name" the application\'s name as people should read it, or leave it out'
        )
    return declaration


class CodexMetadataFetcher(HardenedFetcher):
    """The fetch of a document (``authserver.clients.fetching``) with this server's checks of it: returns
    ``(document, max_age)`` or raises ``CIMDError`` (``DocumentRefused`` with words for the page).

    Also DOT's ``CIMD_METADATA_FETCHER``, though DOT's resolution never runs here: should it, it
    gets only what this server accepts, and DOT's own builder refuses a ``private_key_jwt`` one."""

    def fetch(self, client_id: str):
        metadata, max_age = super().fetch(client_id)
        _check_document(client_id, metadata)
        return metadata, max_age


def _save_application(client_id: str, metadata: dict[str, Any], max_age: int, *, existing: Any) -> Any:
    """Make (or update) the public application the document describes, and keep the keys it
    declares, in one transaction. Raises ``CIMDError`` when the row cannot be made."""
    Application = get_application_model()
    application = existing if existing is not None else Application(client_id=client_id)
    application.user = None
    application.client_type = Application.CLIENT_PUBLIC
    application.registration_source = Application.RegistrationSource.CIMD
    application.authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
    application.name = metadata.get("client_name", "")
    application.redirect_uris = " ".join(metadata["redirect_uris"])
    application.cimd_expires_at = timezone.now() + dt.timedelta(seconds=max_age)
    try:
        # DOT's own rules for a client (redirect URIs' schemes and shapes, lengths); the client
        # id's uniqueness is left to the row's constraint (a concurrent first sight, below).
        application.full_clean(exclude=["client_secret"], validate_unique=False)
    except ValidationError as error:
        raise DocumentRefused(
            f"it does not describe a usable client ({shown('; '.join(error.messages), max_chars=300)})",
            "correct those members of the document",
        ) from None
    try:
        with transaction.atomic():
            application.save()
            assertions.remember(client_id, assertions.declared_keys(metadata))
    except IntegrityError:
        # The same document made by a concurrent first request: that one's row serves.
        application = Application.objects.filter(client_id=client_id).first()
        if application is None or application.registration_source != Application.RegistrationSource.CIMD:
            raise CIMDError("the client's row could not be made") from None
    return application


@dataclass(frozen=True)
class Fetched:
    """What fetching a new client's document came to, for the authorization page."""

    application: Any = None  # the application made from it, or None
    busy: bool = False  # every fetch slot was in use: nothing was fetched
    refused: bool = False  # the document was refused (a moment ago, or now; the note says why)


def _registration_permitted(client_id: str) -> bool:
    # DOT's permission classes (CIMD_REGISTRATION_PERMISSION_CLASSES, their documented
    # has_permission(request, client_id)); the host allow-list this server configures reads the
    # client id only, and an empty list denies every document, as DOT's own resolution does.
    classes = oauth2_settings.CIMD_REGISTRATION_PERMISSION_CLASSES
    return bool(classes) and all(cls().has_permission(None, client_id) for cls in classes)


def fetch_new(client_id: str, *, network: str) -> Fetched:
    """Fetch the document of a client this server does not know, for the authorization endpoint
    (which counts it against the network's limit first), and make its application, waiting for
    a person's approval (``authserver.clients.registration``)."""
    if not oauth2_settings.CIMD_ENABLED or not _registration_permitted(client_id):
        return Fetched()
    if remembered_refusal(client_id) is not None:
        return Fetched(refused=True)  # not fetched again until the note expires
    try:
        metadata, max_age = CodexMetadataFetcher(network).fetch(client_id)
        application = _save_application(client_id, metadata, max_age, existing=None)
    except FetchBusy:
        return Fetched(busy=True)
    except DocumentRefused as error:
        _remember_refusal(client_id, error.problem, error.fix)
        return Fetched(refused=True)
    except CIMDError as error:
        _remember_refusal(client_id, f"it could not be read ({error})", _DOCUMENT_FIX)
        return Fetched(refused=True)
    registration.record_pending(application, network)
    return Fetched(application=application)


def known_application(client_id: str) -> Any:
    """The application of ``client_id``, or None (a client id no database could hold too)."""
    try:
        return get_application_model().objects.filter(client_id=client_id).first()
    except ValueError:  # psycopg refuses a NUL character before sending the query
        return None


def refresh_if_stale(application: Any, *, network: str | None) -> None:
    """Fetch a known client's document again once its copy is past its lifetime, keeping the last
    good copy (for another ``CIMD_FAILURE_BACKOFF_SECONDS``) when the fetch fails or finds no slot."""
    Application = get_application_model()
    if (
        application.registration_source != Application.RegistrationSource.CIMD
        or application.cimd_expires_at is None
        or timezone.now() <= application.cimd_expires_at
    ):
        return
    try:
        metadata, max_age = CodexMetadataFetcher(network).fetch(application.client_id)
        _save_application(application.client_id, metadata, max_age, existing=application)
    except CIMDError:
        retry_at = timezone.now() + dt.timedelta(seconds=oauth2_settings.CIMD_FAILURE_BACKOFF_SECONDS)
        Application.objects.filter(pk=application.pk).update(cimd_expires_at=retry_at)
        application.cimd_expires_at = retry_at
