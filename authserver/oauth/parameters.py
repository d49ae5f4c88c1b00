"""What every OAuth endpoint reads, checked once, before django-oauth-toolkit sees the request.

DOT 3.4.1 hands oauthlib the last copy of a repeated body parameter (``OAuthLibCore.extract_body``),
so oauthlib's own duplicate checks never see two, and a request with two ``code``s or two
``client_id``s was answered as if the last were the only one. RFC 6749 §3.1 and §3.2 say a
parameter MUST NOT be sent more than once (§5.2: ``invalid_request``); RFC 8707's ``resource`` is
the one that may repeat. ``parameters_problem`` is the one rule, and every OAuth endpoint calls it
first (``CheckedParameters``): the token endpoint (every grant), revocation, introspection,
authorization (its query, and the consent form's fields) and the registration endpoints (their
headers). It refuses, as ``invalid_request``:

- a parameter sent twice, in the query or in the body (``resource`` excepted);
- a required one missing or empty, per endpoint and per grant (``Endpoint.required``,
  ``REQUIRED_BY_GRANT``);
- a value longer than ``MAX_CHARS`` (or its own limit, ``LIMITS``), and a body Django cannot read;
- an Authorization header that is not ASCII, or whose Basic credentials are not base64 of
  UTF-8 ``client_id:client_secret`` (``authserver.clients.authentication.basic_credentials``, the
  one reading of that header);
- parameters in the URL of an endpoint that reads its body (a token in a URL ends up in logs).

Each endpoint answers in its own format: JSON with ``Cache-Control: no-store`` (the token,
revocation, introspection and registration endpoints), or, at the authorization endpoint, what
RFC 6749 §4.1.2.1 asks (``CodexAuthorizationView.parameters_refused``): the error page while the
client or its redirect URI is in doubt, else a redirect to that URI with ``error``, ``state`` and
``iss``. What the site's middleware refuses before any view runs (a form body in a charset other
than UTF-8, a body that cannot be read, U+0000) is answered in the endpoint's format too
(``endpoint_refusal``), and so is an error DOT answers itself (``as_oauth_error``).
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import BadRequest, SuspiciousOperation
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.http.multipartparser import MultiPartParserError
from django.urls import Resolver404, resolve

from authserver.clients.authentication import MalformedAuthorization, basic_credentials
from authserver.clients.signed_jwt import MAX_JWT_CHARS
from authserver.core import answers
from authserver.core.answers import never_cached
from authserver.enterprise.id_jag import GRANT_TYPE as JWT_BEARER
from common.inputs import shown

# RFC 8707: a client may ask for several resources by repeating the parameter.
REPEATABLE = frozenset({"resource"})
# Longer than any value a client sends here (a redirect URI, a metadata document's client id, a
# state), short enough that nothing downstream spends on it.
MAX_CHARS = 4_096
# Parameters with limits of their own: a JWT's, and what DOT keeps in a column of a fixed width
# (its Grant's code_challenge and nonce: PostgreSQL refuses a longer value, a 500 once the person
# allows; RFC 7636 §4.1 bounds a verifier, and so a challenge, at 128 characters).
LIMITS = {
    "assertion": MAX_JWT_CHARS,
    "client_assertion": MAX_JWT_CHARS,
    "code_challenge": 128,
    "code_verifier": 128,
    "code_challenge_method": 10,
    "nonce": 255,
}
# Every parameter: a problem with it puts the client and its redirect URI in doubt.
EVERYTHING = frozenset({"*"})

# What each grant cannot go without. (PKCE's code_challenge and code_verifier are DOT's rule,
# PKCE_REQUIRED, answered invalid_request by oauthlib in its place.)
REQUIRED_BY_GRANT: dict[str, tuple[str, ...]] = {
    "authorization_code": ("code",),
    "refresh_token": ("refresh_token",),
    "client_credentials": (),
    JWT_BEARER: ("assertion",),
}


class Problem(Exception):
    """Why an endpoint does not read a request: ``invalid_request``, with what was wrong with it."""

    error = "invalid_request"

    def __init__(self, description: str, *, names: frozenset[str] = EVERYTHING) -> None:
        super().__init__(description)
        self.description = description
        self.names = names  # the parameters it concerns

    def concerns(self, *names: str) -> bool:
        return "*" in self.names or any(name in self.names for name in names)


@dataclass(frozen=True)
class Endpoint:
    """What one endpoint reads: by which methods, whether from its query or its body, and which
    parameters it requires (given the parameters, for the token endpoint's grants)."""

    name: str
    methods: frozenset[str]
    query: bool = False  # its parameters are in the query (GET); else the URL must carry none
    body: bool = True  # its parameters are a form body (POST)
    required: Callable[[QueryDict], tuple[str, ...]] = field(default=lambda params: ())
    headers_only: bool = False  # registration: a JSON body, read by its own guard


def _token_required(params: QueryDict) -> tuple[str, ...]:
    grant = params.get("grant_type")
    if not grant:
        return ("grant_type",)
    return REQUIRED_BY_GRANT.get(grant, ())


TOKEN = Endpoint("token", frozenset({"POST"}), required=_token_required)
REVOCATION = Endpoint("revocation", frozenset({"POST"}), required=lambda params: ("token",))
INTROSPECTION = Endpoint("introspection", frozenset({"POST"}), required=lambda params: ("token",))
# GET: the client's request, in the query; POST: the consent form, in the body (posted to the
# same URL, so its query is the request's too, checked as on GET but requiring nothing).
AUTHORIZATION = Endpoint(
    "authorization",
    frozenset({"GET", "POST"}),
    query=True,
    required=lambda params: ("client_id", "response_type"),
)
CONSENT_FORM_REQUIRED = ("client_id", "redirect_uri", "response_type")
REGISTRATION = Endpoint("registration", frozenset({"GET", "POST", "PUT", "DELETE"}), body=False, headers_only=True)


def _read(params: Callable[[], QueryDict], where: str) -> QueryDict:
    try:
        return params()
    except (BadRequest, SuspiciousOperation, MultiPartParserError) as error:
        raise Problem(f"The request's {where} cannot be read ({type(error).__name__})") from None


def _checked_pairs(params: QueryDict, where: str) -> None:
    """No parameter twice (but ``resource``), none too long. (A name is shown cut and escaped: it
    is the sender's, and goes back in the answer.)"""
    for name, values in params.lists():
        if len(values) > 1 and name not in REPEATABLE:
            raise Problem(
                f"The {shown(name, max_chars=60)} parameter was sent more than once in the {where} (RFC 6749 §3.2)",
                names=frozenset({name}),
            )
        limit = LIMITS.get(name, MAX_CHARS)
        if any(len(value) > limit for value in values):
            raise Problem(
                f"The {shown(name, max_chars=60)} parameter is longer than {limit} characters", names=frozenset({name})
            )


def _missing(params: QueryDict, required: tuple[str, ...], hint: str = "") -> None:
    for name in required:
        if not params.get(name):
            raise Problem(f"Missing {name} parameter{hint}", names=frozenset({name}))


def parameters_problem(request: HttpRequest, endpoint: Endpoint) -> Problem | None:
    """What is wrong with ``request``'s parameters for ``endpoint`` (the module's docstring), or None."""
    if request.method not in endpoint.methods:
        return None  # the view answers the method itself (405)
    try:
        try:
            basic_credentials(request.META.get("HTTP_AUTHORIZATION"))
        except MalformedAuthorization as malformed:
            raise Problem(str(malformed), names=frozenset({"client_id"})) from None
        if endpoint.headers_only:
            return None
        query = _read(lambda: request.GET, "query")
        if endpoint.query:
            _checked_pairs(query, "query")
            if request.method == "GET":
                _missing(query, endpoint.required(query))
        elif query:
            raise Problem("This endpoint reads its parameters from the request body, never from the URL")
        if request.method == "POST" and endpoint.body:
            body = _read(lambda: request.POST, "body")
            _checked_pairs(body, "body")
            if endpoint is AUTHORIZATION:
                _missing(body, CONSENT_FORM_REQUIRED, " in the approval form")
            else:
                form = request.content_type in {"application/x-www-form-urlencoded", "multipart/form-data"}
                hint = "" if form else " (send the parameters as application/x-www-form-urlencoded)"
                _missing(body, endpoint.required(body), hint)
    except Problem as problem:
        return problem
    return None


def as_oauth_error(response: HttpResponse) -> HttpResponse:
    """An error answer of a DOT view as RFC 6749 §5.2 has it: JSON, never stored. (DOT answers an
    oauthlib error raised outside a grant's validation, such as ``invalid_target`` while the token
    is saved, with neither.)"""
    if response.status_code >= 400:
        response["Content-Type"] = "application/json"
        never_cached(response)
    return response


def oauth_error(problem: Problem) -> JsonResponse:
    """An OAuth error response (RFC 6749 §5.2): JSON, never stored."""
    return answers.oauth_error(problem.error, problem.description)


class CheckedParameters:
    """An OAuth endpoint whose parameters ``parameters_problem`` checks first: its ``endpoint``,
    and how it answers a problem (JSON by default; the authorization view overrides it). A view
    that has a ``dispatch`` of its own calls ``parameters_refusal`` as its first step; the others
    take ``ParametersFirst``."""

    endpoint: Endpoint
    request: HttpRequest

    def parameters_refusal(self, request: HttpRequest) -> HttpResponse | None:
        if (problem := parameters_problem(request, self.endpoint)) is not None:
            return self.parameters_refused(problem)
        return None

    def parameters_refused(self, problem: Problem) -> HttpResponse:
        return oauth_error(problem)


class ParametersFirst(CheckedParameters):
    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if (refused := self.parameters_refusal(request)) is not None:
            return refused
        return super().dispatch(request, *args, **kwargs)  # type: ignore[misc]


def endpoint_refusal(request: HttpRequest, description: str) -> HttpResponse | None:
    """The answer of the OAuth endpoint at ``request``'s path to a request refused before its view
    ran (a form body in a charset other than UTF-8, a body Django cannot read, U+0000 anywhere:
    ``codex_site.middleware``), in that endpoint's format; None for any other path. Its body is
    not read: every parameter is in doubt."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return None
    view_class = getattr(match.func, "view_class", None)
    if view_class is None or not issubclass(view_class, CheckedParameters):
        return None
    view = view_class(**getattr(match.func, "view_initkwargs", {}))
    view.setup(request, *match.args, **match.kwargs)
    return view.parameters_refused(Problem(description))
