"""What the authorization page says when it refuses a client, in words a person can pass on.

DOT answers a client it cannot use with "invalid_request: Invalid client_id parameter value"
(or "Mismatching redirect URI"), which tells the person nothing they can act on. The page
names instead which document or registration was refused, what in it could not be used, and
what the application's maker should change (contract 8).
"""

from dataclasses import dataclass
from urllib.parse import urlsplit

from oauth2_provider.cimd import is_cimd_client_id

from authserver.clients import redirect_uris
from authserver.clients.cimd import Fetched, known_application, refusal_hint, remembered_refusal
from authserver.core import policy
from common.inputs import shown


@dataclass(frozen=True)
class Refusal:
    what: str  # the document or registration, named
    problem: str  # what in it could not be used
    fix: str  # what its maker should change
    busy: bool = False  # nothing was refused: this server could not fetch it just now
    policy: str | None = None  # the operator's rule that refused it, in words (authserver.core.policy)


def _redirect_problem(what: str, application: object, redirect_uri: str, *, document: bool) -> Refusal:
    where = "lists" if document else "registered"
    if redirect_uris.listed(application, redirect_uri) and (
        refused := redirect_uris.registered_uri_refusal(application, redirect_uri)
    ):
        # One of its own, which an earlier release let in and the redirect-URI rule refuses.
        return Refusal(
            what=what,
            problem=f"the address the application asked to be sent back to, {refused.shown_uri()}, is one it "
            f"{where}, but this server sends no answer there: {refused.problem}",
            fix=refused.fix + (" in the document" if document else ", and register again"),
        )
    registered = ", ".join(shown(uri, max_chars=200) for uri in getattr(application, "redirect_uris", "").split()[:5])
    return Refusal(
        what=what,
        problem=f"the address the application asked to be sent back to, {shown(redirect_uri, max_chars=200)}, "
        f"is not one of the redirect_uris it {where} ({registered})",
        fix=f"add that address to its redirect_uris{' in the document' if document else ''}, or have the "
        "application use one that is listed",
    )


def policy_refusal(client_id: str) -> Refusal | None:
    """The refusal of a client the operator's policy does not let connect, or None."""
    if is_cimd_client_id(client_id) and not policy.cimd_host_allowed(client_id):
        host = urlsplit(client_id).hostname or ""
        return Refusal(
            f"the application's metadata document at {shown(client_id, max_chars=200)}",
            f"this server accepts metadata documents only from the hosts its operator allows, and {host} "
            "is not one of them",
            "ask this server's operator to allow the host (CODEX_CIMD_ALLOWED_HOSTS)",
            policy=f"the operator's policy: {policy.cimd_refusal_words(client_id)}",
        )
    return None


def explain(client_id: str, redirect_uri: str, *, fetched: Fetched | None = None) -> Refusal | None:
    """Why an authorization request naming ``client_id`` and ``redirect_uri`` was refused, or
    None when the client and its redirect address are not the reason. ``fetched``: what this
    request's fetch of the client's document came to, if it made one."""
    if not client_id:
        return None
    application = known_application(client_id)
    if is_cimd_client_id(client_id):
        what = f"the application's metadata document at {shown(client_id, max_chars=200)}"
        if hint := refusal_hint(client_id):
            return Refusal(what, hint, "serve the document from a public https address")
        if fetched is not None and fetched.busy:
            return Refusal(
                what,
                "every one of this server's fetches of applications' documents was in use (nothing is held "
                "against the document)",
                "nothing: try again in a few seconds",
                busy=True,
            )
        if refused := remembered_refusal(client_id):
            return Refusal(what, refused["problem"], refused["fix"])
        if refused := policy_refusal(client_id):
            return refused
        if application is not None and redirect_uri and not application.redirect_uri_allowed(redirect_uri):
            return _redirect_problem(what, application, redirect_uri, document=True)
        if application is None:
            return Refusal(
                what,
                "it was refused a moment ago, and is not fetched again for a minute",
                "check that the document is served at exactly this address; then try again in a minute",
            )
        return None
    what = f"the application's registration (client ID {shown(client_id, max_chars=80)})"
    if application is None:
        return Refusal(
            what,
            "this server has no application registered with this client ID: it was never registered here, or "
            "it was removed (a registration nobody signed in with expires)",
            "register again with Dynamic Client Registration, or name the application with a metadata document",
        )
    if redirect_uri and not application.redirect_uri_allowed(redirect_uri):
        return _redirect_problem(what, application, redirect_uri, document=False)
    return None
