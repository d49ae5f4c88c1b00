"""Site-wide middleware."""

import logging
from collections.abc import AsyncIterator, Callable, Iterator

from asgiref.sync import sync_to_async
from django.core.exceptions import BadRequest, SuspiciousOperation
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError

from authserver.clients.authentication import MalformedAuthorization, basic_credentials
from authserver.oauth.parameters import endpoint_refusal
from codex_site import errors
from common.outage import UNAVAILABLE_ERRORS, log_database_unavailable
from common.redirects import safe_next

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
STREAM_BLOCK_BYTES = 64 * 1024


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
# What reading a query or a form can raise: Django answers each with a 400.
UNREADABLE_BODY = (BadRequest, SuspiciousOperation, MultiPartParserError)
FORM_CHARSETS = frozenset({"utf-8", "utf8", "us-ascii", "ascii"})


class FormCharsetMiddleware:
    """A form body that declares a charset other than UTF-8 gets 415 before anything reads it.

    Django refuses such an urlencoded body with ``BadRequest`` only when ``request.POST``
    is first read, and its error handling reads ``request.POST`` again (the 400 page is
    CSRF-aware), so the refusal ended as "Exception in ASGI application". A
    browser never sends a charset on a form; UTF-8 (or its ASCII subset) is the only one
    the pages and the OAuth endpoints read. The OAuth endpoints answer it in their own format
    (``authserver.oauth.parameters.endpoint_refusal``), everything else with a plain 415."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        charset = request.content_params.get("charset")
        if request.content_type in FORM_TYPES and charset is not None and charset.lower() not in FORM_CHARSETS:
            logger.info("refused a %s body in charset %r on %s", request.content_type, charset[:40], request.path[:200])
            # An OAuth endpoint answers in its own format (JSON, or the authorization page).
            if (answer := endpoint_refusal(request, "Form bodies must be UTF-8")) is not None:
                return answer
            return HttpResponse("Form bodies must be UTF-8.\n", status=415, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class NulCharacterMiddleware:
    """U+0000 in the path, a query or form parameter, or Basic credentials: 400 before any
    view runs.

    No text this server stores or looks up may hold it (contract 3 refuses it in every
    entry field; client ids, codes, tokens, usernames and admin searches are ASCII or
    printable), and PostgreSQL cannot even compare with it: a lookup of a ``client_id``,
    a code or an admin search holding U+0000 raised ``DataError``, a 500. One check here
    covers every view, DOT's and the admin's included. The OAuth endpoints answer the refusal in
    their own format (``authserver.oauth.parameters.endpoint_refusal``), and a body this check
    cannot read either (everywhere else Django's 400 answers that)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            where = _nul_in(request)
        except UNREADABLE_BODY as error:
            if (
                answer := endpoint_refusal(request, f"The request cannot be read ({type(error).__name__})")
            ) is not None:
                return answer
            raise
        if where:
            logger.info("refused a request with U+0000 in its %s on %s", where, request.path[:200])
            if (
                answer := endpoint_refusal(request, f"U+0000 in the request's {where}: no value here may hold it")
            ) is not None:
                return answer
            return errors.bad_request(request)  # the site's 400 page, or JSON on the API paths
        return self.get_response(request)


def _nul_in(request: HttpRequest) -> str | None:
    """Where the request carries U+0000 (a few words), or None."""
    if "\x00" in request.path:
        return "path"
    if _holds_nul(request.GET):
        return "query string"
    if request.method == "POST" and request.content_type in FORM_TYPES and _holds_nul(request.POST):
        return "form fields"
    try:
        basic = basic_credentials(request.META.get("HTTP_AUTHORIZATION"))
    except MalformedAuthorization:
        return None  # the client authentication refuses a header it cannot read, as invalid_request
    if basic is not None and any("\x00" in part for part in basic):  # form-decoded: %00 is U+0000
        return "credentials"
    return None


def _holds_nul(data) -> bool:
    return any("\x00" in key or any("\x00" in value for value in values) for key, values in data.lists())


class AsyncStreamingMiddleware:
    """Under ASGI, every streaming answer is sent from an asynchronous iterator, block by block.

    Django's ASGI handler consumes a *synchronous* iterator into a list before sending any of
    it, and warns "StreamingHttpResponse must consume synchronous iterators": WhiteNoise's
    static files (a file response) and the person's exports (a generator reading the database)
    are both synchronous. Here such an iterator is pulled in the request's own sync thread
    (``sync_to_async`` is thread-sensitive: where the ORM runs), about 64 KiB per step, so an
    export of any size streams in flat memory. First in ``MIDDLEWARE``, so it sees every answer.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if isinstance(request, ASGIRequest) and response.streaming and not response.is_async:  # type: ignore[attr-defined]
            response.streaming_content = _pulled(iter(response.streaming_content))  # type: ignore[attr-defined]
        return response


def _next_block(chunks: Iterator[bytes]) -> bytes | None:
    """The next chunks joined up to about ``STREAM_BLOCK_BYTES``; None when there are no more."""
    block: list[bytes] = []
    size = 0
    for chunk in chunks:
        block.append(chunk)
        size += len(chunk)
        if size >= STREAM_BLOCK_BYTES:
            break
    return b"".join(block) if block else None


async def _pulled(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    pull = sync_to_async(_next_block)
    while (block := await pull(chunks)) is not None:
        yield block


class UnsafeNextMiddleware:
    """A ``next`` in the query string that leads off this site (another host, or a scheme
    other than http and https, ``javascript:`` among them) is dropped before any view sees it,
    as ``common.redirects.safe_next`` judges it: every page that renders a ``next`` (the sign-in
    page's "Continue" link, the hidden field of allauth's forms) or follows one then has only
    this site's own. A form's posted ``next`` is checked where it is followed (allauth's
    ``get_next_redirect_url``, which asks the same function through the account adapter)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "next" in request.GET and not all(safe_next(request, value) for value in request.GET.getlist("next")):
            kept = request.GET.copy()
            del kept["next"]
            request.GET = kept
        return self.get_response(request)
