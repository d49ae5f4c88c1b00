"""Which redirect URIs a client may register, and where an answer sent to one arrives.

One rule, ``redirect_uri_check``, for every door that registers a redirect URI: Dynamic Client
Registration and its RFC 7592 update (``authserver.clients.registration``) and a Client ID Metadata
Document (``authserver.clients.cimd``). A redirect URI is accepted when it is

- https, to any host;
- http to a loopback address (``localhost``, ``127.0.0.1``, ``[::1]``: ``loopback.is_loopback``), an
  application listening on the person's own computer (RFC 8252 §7.3);
- a private-use scheme (RFC 8252 §7.1: ``cursor://…``, ``vscode://…``, ``com.example.app:/…``) of a
  public client, one that proves itself with PKCE alone (``token_endpoint_auth_method`` ``none``).
  Whichever application the person's system registered for the scheme receives the answer, so
  only the PKCE verifier, held by the client that asked, makes its code worth anything (S256 is
  required of every client: ``CodexOAuth2Validator.validate_response_type``);

and never with a fragment (RFC 6749 §3.1.2), a wildcard, user information, white space or a control
character, nor longer than ``REDIRECT_URI_MAX_CHARS``; never a scheme a browser handles itself
(``BROWSER_SCHEMES``: the answer would reach no application, and some run in the page's origin); and
only as django-oauth-toolkit's own URI validator reads it, so that DOT refuses nothing the rule
accepts.

DOT asks two questions of an application, and ``connect_dot`` (run at start-up) has both answered
here, from the rule:

- which schemes its redirect URIs may use (``Application.get_allowed_schemes``, against which DOT's
  model clean checks each registered URI): each scheme whose every registered URI the rule accepts
  (``dot_allowed_schemes``), so that DOT's clean accepts an application exactly when the rule accepts
  each of its redirect URIs, whichever door saves it (the admin's form included);
- whether a request's redirect URI is one of the client's (``Application.redirect_uri_allowed``, which
  oauthlib asks at the authorization endpoint): DOT's match, exact but for the port of a loopback IP
  (RFC 8252 §7.3), and the rule, so that a registration an earlier release let in is never sent to
  a URI the rule refuses (``registered_uri_refusal`` says why, for the refused-client page).

The authorization view sends the person on only to a scheme of the client's accepted redirect URIs
(``redirect_schemes``). ``destination`` says, in a person's words, where an answer arrives: a web
host, or an application on their computer, named when its scheme is one of ``APPLICATION_SCHEMES``.
"""

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from oauth2_provider.models import AbstractApplication, get_application_model
from oauth2_provider.validators import AllowedURIValidator

from authserver.clients.loopback import is_loopback
from authserver.models import ClientKeys
from common.inputs import shown, text_problem

REDIRECT_URI_MAX_CHARS = 2_048
REDIRECT_URIS_MAX_ITEMS = 32
# RFC 3986 §3.1: scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
# Schemes a browser acts on itself rather than hand to an application: the URL Standard's special
# schemes other than http(s) and the Fetch Standard's local ones, the script schemes, and the
# browsers' own internal ones. An answer sent to one reaches no client, and some run in the origin
# of the page that redirects.
BROWSER_SCHEMES = frozenset(
    {
        "about",
        "blob",
        "chrome",
        "chrome-extension",
        "data",
        "file",
        "filesystem",
        "ftp",
        "intent",
        "javascript",
        "moz-extension",
        "resource",
        "vbscript",
        "view-source",
        "ws",
        "wss",
    }
)
# The applications that open a scheme, for the consent page: only schemes whose application documents
# them as its own. Cursor: its documentation of cursor:// links (cursor://anysphere.cursor-deeplink/…)
# and its MCP callback, cursor://anysphere.cursor-mcp/oauth/callback. Visual Studio Code: its API
# reference (env.uriScheme; a UriHandler receives vscode://<publisher>.<extension>/…, and
# vscode-insiders:// in Insiders); Code - OSS: microsoft/vscode's product.json ("urlProtocol":
# "code-oss"). Windsurf: its MCP documentation (windsurf://windsurf-mcp-registry?serverName=…).
APPLICATION_SCHEMES = {
    "cursor": "Cursor",
    "vscode": "Visual Studio Code",
    "vscode-insiders": "Visual Studio Code - Insiders",
    "code-oss": "Code - OSS",
    "windsurf": "Windsurf",
}
_LOOPBACK_FIX = "use https, or http to localhost, 127.0.0.1 or [::1] for an application on the person's own computer"


class RedirectURIRefused(Exception):
    """A redirect URI the rule refuses: which (``uri``, and ``index`` in its list), what about it
    could not be used (``problem``, a clause about "it") and what to do instead (``fix``)."""

    code = "invalid_redirect_uri"  # RFC 7591 §3.2.2

    def __init__(self, uri: object, problem: str, fix: str, *, index: int | None = None) -> None:
        super().__init__(problem)
        self.uri = uri
        self.problem = problem
        self.fix = fix
        self.index = index

    def shown_uri(self) -> str:
        return shown(self.uri, max_chars=200) if isinstance(self.uri, str) else ""


def _scheme_of(uri: str) -> str | None:
    scheme, separator, _ = uri.partition(":")
    return scheme.lower() if separator and _SCHEME.fullmatch(scheme) else None


def is_private_use(uri: object) -> bool:
    """Whether ``uri`` names an application's own scheme (neither http nor https)."""
    scheme = _scheme_of(uri) if isinstance(uri, str) else None
    return scheme is not None and scheme not in {"http", "https"}


def redirect_uri_check(uri: object, *, public: bool) -> None:
    """Raise ``RedirectURIRefused`` unless ``uri`` may be a redirect URI of a client, public (PKCE
    alone, ``token_endpoint_auth_method`` ``none``) or not. The one rule: see the module's words."""

    def refused(problem: str, fix: str) -> RedirectURIRefused:
        return RedirectURIRefused(uri, problem, fix)

    if problem := text_problem(uri, max_chars=REDIRECT_URI_MAX_CHARS, what="it"):
        raise refused(problem, f"send each redirect URI as one text of at most {REDIRECT_URI_MAX_CHARS} characters")
    uri = str(uri)  # (it is one: text_problem refused anything else)
    if any(character.isspace() for character in uri):
        raise refused("it holds white space", "send each redirect URI whole, with no space in it (a space is %20)")
    scheme = _scheme_of(uri)
    if scheme is None:
        raise refused(
            "it has no scheme (such as https:) at its start: it is not an absolute URI",
            "send the whole URI, scheme included",
        )
    if "#" in uri:
        raise refused(
            "it has a fragment (a part from #), which a redirect URI may not have (RFC 6749 §3.1.2)",
            "remove the fragment",
        )
    if "*" in uri:
        raise refused("it holds a wildcard (*), but redirect URIs are matched exactly", "list each URI in full")
    if scheme in BROWSER_SCHEMES:
        raise refused(
            f"it uses the {scheme}: scheme, which a browser handles itself, so the answer would reach no application",
            _LOOPBACK_FIX + ", or the application's own scheme",
        )
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 (raises ValueError when the port is not one)
    except ValueError:
        raise refused(
            "it is not a valid URI: its host is not one, or its port is not a number from 0 to 65535",
            "correct the host or the port",
        ) from None
    if "@" in parts.netloc:
        raise refused(
            "it carries user information (a name before @) in its authority",
            "remove the user information and the @",
        )
    if scheme == "http" and not is_loopback(parts.hostname):
        raise refused(
            "it uses plain http to a host that is not the person's own computer: http is accepted only for "
            "localhost, 127.0.0.1 and [::1]",
            _LOOPBACK_FIX,
        )
    if scheme not in {"http", "https"} and not public:
        raise refused(
            f"it uses {scheme}:, an application's own scheme, which is accepted only for a public client "
            '(token_endpoint_auth_method "none", proven by PKCE alone): whichever application claims the scheme '
            "receives the answer",
            'register a public client (token_endpoint_auth_method "none") for it, or use https',
        )
    try:
        AllowedURIValidator({scheme}, "redirect uri", allow_path=True, allow_query=True)(uri)
    except ValidationError as error:
        raise refused(
            f"it is not a valid URI ({shown('; '.join(error.messages), max_chars=200)})", "correct the URI"
        ) from None


def redirect_uris_check(uris: list[Any], *, public: bool) -> None:
    """``redirect_uri_check`` for each of a client's redirect URIs, and for their number; raises
    ``RedirectURIRefused`` naming the first it refuses (its ``index``)."""
    if len(uris) > REDIRECT_URIS_MAX_ITEMS:
        raise RedirectURIRefused(
            None,
            f"there are {len(uris)} of them; the limit is {REDIRECT_URIS_MAX_ITEMS}",
            "list only the redirect URIs the application uses",
        )
    for index, uri in enumerate(uris):
        try:
            redirect_uri_check(uri, public=public)
        except RedirectURIRefused as refused:
            refused.index = index
            raise


def is_public(application: Any) -> bool:
    """Whether ``application`` proves itself with PKCE alone: a public client that declared no keys
    (a metadata document's ``private_key_jwt`` client is saved as a public one, with its keys)."""
    return application.client_type == get_application_model().CLIENT_PUBLIC and not (
        ClientKeys.objects.filter(client_id=application.client_id).exists()
    )


class _Client:
    """One application's answer to ``redirect_uri_check``, asking the database whether it is
    public only for a private-use URI, and once."""

    def __init__(self, application: Any) -> None:
        self.application = application
        self._public: bool | None = None

    def refusal(self, uri: str) -> RedirectURIRefused | None:
        if is_private_use(uri) and self._public is None:
            self._public = is_public(self.application)
        try:
            redirect_uri_check(uri, public=bool(self._public))
        except RedirectURIRefused as refused:
            return refused
        return None


def _registered(application: Any) -> list[str]:
    return (application.redirect_uris or "").split()


def _dot_scheme(uri: str) -> str | None:
    # The scheme as DOT's URI validator reads it.
    try:
        return urlsplit(uri).scheme
    except ValueError:
        return None


def dot_allowed_schemes(application: Any) -> list[str]:
    """DOT's ``Application.get_allowed_schemes``: the schemes every registered redirect URI of which
    the rule accepts. DOT's clean refuses each URI whose scheme is not one, so it refuses an
    application exactly when the rule refuses one of its URIs."""
    client = _Client(application)
    accepted: dict[str, bool] = {}
    for uri in _registered(application):
        if scheme := _dot_scheme(uri):
            accepted[scheme] = accepted.get(scheme, True) and client.refusal(uri) is None
    return sorted(scheme for scheme, every in accepted.items() if every)


def redirect_schemes(application: Any) -> list[str]:
    """The schemes the authorization view may send a person to for ``application``: those of its
    registered redirect URIs the rule accepts (an answer goes only to one, matched by
    ``redirect_uri_allowed``)."""
    client = _Client(application)
    return sorted(
        {scheme for uri in _registered(application) if (scheme := _dot_scheme(uri)) and client.refusal(uri) is None}
    )


def registered_uri_refusal(application: Any, uri: str) -> RedirectURIRefused | None:
    """Why the rule refuses ``uri`` as a redirect URI of ``application``, or None."""
    return _Client(application).refusal(uri)


def listed(application: Any, uri: str) -> bool:
    """Whether ``uri`` matches one of ``application``'s registered redirect URIs, as DOT matches them
    (its own method, on the abstract model ``connect_dot`` leaves alone)."""
    return AbstractApplication.redirect_uri_allowed(application, uri)


def dot_redirect_uri_allowed(application: Any, uri: str) -> bool:
    """DOT's ``Application.redirect_uri_allowed``: ``uri`` is one of the application's redirect URIs,
    as DOT matches them, and one the rule accepts."""
    return listed(application, uri) and registered_uri_refusal(application, uri) is None


def connect_dot() -> None:
    """Have DOT's Application answer its two questions about redirect URIs from the rule
    (registered in ``common.internals``: DOT documents both methods as its application model's to
    override; this project keeps DOT's own model, whose tables cannot be swapped for another's)."""
    Application = get_application_model()
    Application.get_allowed_schemes = dot_allowed_schemes
    Application.redirect_uri_allowed = dot_redirect_uri_allowed


# --- where an answer arrives, in a person's words ------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """Where an authorization answer sent to a redirect URI arrives."""

    host: str = ""  # the web host it goes to (https, or http to this computer)
    scheme: str = ""  # or the application scheme that opens it
    application: str = ""  # and the application known to open that scheme, if it is one
    on_this_computer: bool = False  # an application on the person's own computer receives it

    @property
    def label(self) -> str:
        """A few words naming it, for a list of applications."""
        if not self.scheme:
            return self.host
        return self.application or f"an application for {self.scheme}: links"


def destination(redirect_uri: str) -> Destination:
    """Where an answer sent to ``redirect_uri`` (one the rule accepted) arrives."""
    try:
        parts = urlsplit(redirect_uri)
        host = parts.hostname or ""
    except ValueError:
        return Destination()
    scheme = parts.scheme.lower()
    if scheme in {"http", "https"}:
        return Destination(host=host, on_this_computer=is_loopback(host))
    return Destination(scheme=scheme, application=APPLICATION_SCHEMES.get(scheme, ""), on_this_computer=True)
