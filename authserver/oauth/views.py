"""This server's versions of DOT endpoints: authorization (DOT's view with this server's consent
page, consent always asked, iss on every redirect, a client the operator's policy refuses
turned away, and the one place a new client's metadata document is fetched, under a
per-network limit), dynamic registration with a clear 429 (or 403 when the operator's policy
turns it off), the server metadata, and introspection for the resource servers an operator
provisions. The connected-applications pages are in ``authserver.people.connected``."""

import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from csp.decorators import csp_replace
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.cimd import is_cimd_client_id
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.http import OAuth2ResponseRedirect
from oauth2_provider.models import get_access_token_model, get_application_model
from oauth2_provider.views import AuthorizationView, IntrospectTokenView, OAuthServerMetadataView, RevokeTokenView
from oauth2_provider.views.dynamic_client_registration import DynamicClientRegistrationView
from oauthlib.common import add_params_to_uri
from oauthlib.oauth2.rfc6749 import errors

import codex_metrics
from authserver.clients import assertions, cimd
from authserver.clients.authentication import INTROSPECTION_AUTH_METHODS
from authserver.clients.redirect_uris import destination, redirect_schemes
from authserver.clients.registration import (
    GuardedRegistrationManagementView,
    NeverCachedMixin,
    expire_pending,
    pending_refusal,
    record_pending,
    refused_by_policy,
    registration_body_problem,
)
from authserver.core import policy
from authserver.core.answers import never_cached, oauth_error
from authserver.core.token_check import TokenRefused, check_access_token, token_checksum
from authserver.enterprise import id_jag
from authserver.oauth import parameters
from authserver.oauth.parameters import CheckedParameters, ParametersFirst, Problem
from authserver.oauth.refusals import explain, policy_refusal
from common.ratelimit import allow, client_network

# How a client's redirect URI's origin may be written into a CSP source: a scheme, and for
# http(s) a host (a name, an IPv4 address or a bracketed IPv6 one) with an optional port.
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_HOST = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)*|[0-9a-f:.]+")


def _too_many(message: str, retry_after: int) -> JsonResponse:
    return oauth_error("too_many_requests", message, status=429, headers={"Retry-After": str(retry_after)})


def _with_iss(url: str) -> str:
    """RFC 9207: every authorization response names its issuer, errors included, whatever the
    redirect URI's scheme (an application's own, such as cursor:, too)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    if any(key == "iss" for key, _ in query):
        return url
    query.append(("iss", settings.CODEX_ISSUER_URL))
    return urlunsplit(parts._replace(query=urlencode(query)))


def redirect_source(redirect_uri: str) -> str | None:
    """The CSP source naming ``redirect_uri``'s origin: ``https://host:port`` for http(s), the
    scheme alone (``cursor:``) for an application's own scheme; None for anything that cannot be
    written safely into a policy."""
    try:
        parts = urlsplit(redirect_uri)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not _SCHEME.fullmatch(scheme):
        return None
    if scheme not in {"http", "https"}:
        return scheme + ":"
    host = parts.hostname or ""
    if not _HOST.fullmatch(host):
        return None
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + (f":{port}" if port is not None else "")


def _without(query: Any, names: tuple[str, ...]) -> Any:
    kept = query.copy()
    for name in names:
        kept.pop(name, None)
    return kept


class CodexAuthorizationView(CheckedParameters, AuthorizationView):
    """DOT's authorization endpoint with this server's consent page.

    Consent is always asked (``REQUEST_APPROVAL_PROMPT`` is "force"): a request's
    ``approval_prompt`` would let DOT skip the page for a client that holds a live token, so it
    is dropped before DOT reads it, and no application may skip it (``skip_authorization`` is
    never saved on, ``authserver.signals``). The consent page's Content-Security-Policy lets its
    form lead to this server and the client's redirect URI's origin only: the form's answer is a
    redirect there, and CSP's form-action covers a form's redirects too."""

    template_name = "oauth2_provider/authorize.html"
    # Parameters that would choose whether the person is asked; none may.
    CONSENT_SKIPPING = ("approval_prompt",)
    fetched = None  # what fetching a new client's document came to, in this request

    endpoint = parameters.AUTHORIZATION

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        # First of all: the request's parameters, read once (authserver.oauth.parameters).
        if (refused := self.parameters_refusal(request)) is not None:
            return refused
        if any(name in request.GET for name in self.CONSENT_SKIPPING):
            request.GET = _without(request.GET, self.CONSENT_SKIPPING)
        client_id = request.GET.get("client_id", "")
        if (refusal := policy_refusal(client_id)) is not None:
            # Known or not, a client the operator's policy refuses connects no further, and its
            # document is not fetched.
            policy.refused(policy.CIMD_HOSTS, client_id=client_id, reason=policy.cimd_refusal_words(client_id))
            error = {"error": "invalid_client", "description": "This application is refused by the operator's policy."}
            return render(request, self.template_name, {"error": error, "refusal": refusal}, status=400)
        unknown_document = is_cimd_client_id(client_id) and cimd.known_application(client_id) is None
        if unknown_document and (refused := self._fetch_document(request, client_id)):
            return refused
        if request.method == "GET" and not request.user.is_authenticated:
            # Check the request before asking anyone to sign in (contract 8): a bad client
            # or redirect URI gets the error page (it must not redirect), a missing PKCE
            # challenge or a foreign resource goes back to the client with the error and
            # iss. A valid request continues to the sign-in page as before.
            try:
                self.validate_authorization_request(request)
            except OAuthToolkitError as error:
                return self.error_response(error, application=None)
        return super().dispatch(request, *args, **kwargs)

    def _fetch_document(self, request: HttpRequest, client_id: str) -> HttpResponse | None:
        """Fetch the document of a client this server does not know: the one place any endpoint
        does, counted per network (an IPv6 /64) and bounded by the network's waiting
        registrations. A refusal page, or None to go on (the client is known now, or the error
        page says why not)."""
        network = client_network(request)
        ok, retry_after = allow("cimd", network, limit=settings.CODEX_CIMD_RATE_LIMIT, window_seconds=600)
        if not ok:
            codex_metrics.limit_refused("metadata_documents")
            return self._rate_limited(retry_after, "sign-ins with new applications")
        expire_pending()
        if waiting := pending_refusal(network):
            codex_metrics.limit_refused("registrations_waiting")
            return self._rate_limited(waiting[1], "new applications waiting for approval")
        self.fetched = cimd.fetch_new(client_id, network=network)
        return None

    def _rate_limited(self, retry_after: int, what: str) -> HttpResponse:
        response = render(
            self.request, "authserver/rate_limited.html", {"retry_after": retry_after, "what": what}, status=429
        )
        response["Retry-After"] = str(retry_after)
        return response

    def form_invalid(self, form: Any) -> HttpResponse:
        # A consent POST missing the hidden fields the consent page sends (DOT would render
        # the consent page again, for an application it never looked up: a 500).
        return self._refused("The approval form is incomplete; start again from the application.")

    def form_valid(self, form: Any) -> HttpResponse:
        # DOT looks the client up with .get(): an unknown client_id would be a 500.
        application = get_application_model().objects.filter(client_id=form.cleaned_data["client_id"]).first()
        if application is None:
            return self._refused("The approval form names an application this server does not know.")
        # Every answer of the form, Deny's included, goes only to a redirect URI the client
        # registered: DOT checks the posted one when the person allows, and redirects a denial to
        # it unchecked.
        if not application.redirect_uri_allowed(form.cleaned_data["redirect_uri"]):
            return self._refused("The approval form names an address the application did not register.")
        return super().form_valid(form)

    def parameters_refused(self, problem: Problem) -> HttpResponse:
        """RFC 6749 §4.1.2.1: while the client or its redirect URI is in doubt (sent twice, missing,
        unknown, not registered, or a body that cannot be read), the person sees the error page;
        otherwise the error goes back to that redirect URI, with the state (when sent once) and iss."""
        if problem.concerns("client_id", "redirect_uri"):
            return self._refused(problem.description)
        params = self.request.GET if self.request.method == "GET" else self.request.POST
        client_id, redirect_uri = params.get("client_id"), params.get("redirect_uri")
        application = get_application_model().objects.filter(client_id=client_id).first() if client_id else None
        if application is None or not redirect_uri or not application.redirect_uri_allowed(redirect_uri):
            return self._refused(problem.description)
        answer = [("error", problem.error), ("error_description", problem.description)]
        if not problem.concerns("state") and (state := params.get("state")):
            answer.append(("state", state))
        return self.redirect(add_params_to_uri(redirect_uri, answer), application)

    def _refused(self, description: str) -> HttpResponse:
        """The consent page's error form (400): a request whose client or redirect URI is in doubt,
        or a POST that no consent page could have sent."""
        error = {"error": "invalid_request", "description": description}
        return render(self.request, self.template_name, {"error": error}, status=400)

    def redirect(self, redirect_to: str, application: Any) -> HttpResponse:
        # The answer goes to a redirect URI oauthlib matched against the client's own (DOT hands an
        # error found before it loaded the client with None: the request's client all the same),
        # so it may use the scheme of any of the client's redirect URIs the rule accepts.
        if application is None:
            params = self.request.GET if self.request.method == "GET" else self.request.POST
            application = cimd.known_application(params.get("client_id", ""))
        schemes = redirect_schemes(application) if application is not None else []
        return OAuth2ResponseRedirect(_with_iss(redirect_to), schemes)

    def error_response(self, error: Any, application: Any, **kwargs: Any) -> HttpResponse:
        response = super().error_response(error, application, **kwargs)
        if getattr(response, "context_data", None) is not None:  # the error page, not a redirect
            params = self.request.GET if self.request.method == "GET" else self.request.POST
            refusal = explain(params.get("client_id", ""), params.get("redirect_uri", ""), fetched=self.fetched)
            # A TemplateResponse, rendered after this.
            response.context_data["refusal"] = refusal
            if refusal is not None and refusal.busy:
                response.status_code = 503
                response["Retry-After"] = "5"
        return response

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        sources = ["'self'"]
        if source := redirect_source(context.get("redirect_uri") or ""):
            sources.append(source)
        return csp_replace({"form-action": sources})(super().render_to_response)(context, **kwargs)

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        context = super().get_context_data(**kwargs)
        # Where the answer goes, in words the person recognises: a web host, or an application on
        # their computer (named when its scheme is a well-known one), never a bare URI.
        context["destination"] = destination(context.get("redirect_uri") or "")
        application = context.get("application")
        client_id = getattr(application, "client_id", "")
        context["client_home"] = urlsplit(client_id).hostname if is_cimd_client_id(client_id) else None
        return context


@method_decorator(csrf_exempt, name="dispatch")
class RateLimitedRegistrationView(ParametersFirst, NeverCachedMixin, DynamicClientRegistrationView):
    """RFC 7591 registration (never cached): at most CODEX_DCR_RATE_LIMIT per client address
    per hour, and only while the address and the server have room for one more registration
    waiting for a person's approval (``authserver.clients.registration``). Its headers are read
    first (``authserver.oauth.parameters``)."""

    endpoint = parameters.REGISTRATION

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not policy.dcr_enabled():
            # Before the rate limit: a refusal by policy costs the address nothing. (The view's
            # NeverCachedMixin marks it no-store, as every answer of this endpoint.)
            return refused_by_policy("dynamic client registration is off")
        network = client_network(request)
        ok, retry_after = allow("dcr", network, limit=settings.CODEX_DCR_RATE_LIMIT, window_seconds=3600)
        if not ok:
            codex_metrics.limit_refused("registrations")
            return _too_many(
                "Too many client registrations from this address; retry after the Retry-After interval.",
                retry_after,
            )
        if problem := registration_body_problem(request):
            return problem
        expire_pending()
        if waiting := pending_refusal(network):
            codex_metrics.limit_refused("registrations_waiting")
            return _too_many(*waiting)
        response = super().post(request, *args, **kwargs)
        if response.status_code == 201:
            client_id = json.loads(response.content)["client_id"]
            record_pending(get_application_model().objects.get(client_id=client_id), network)
        return response


class CodexServerMetadataView(OAuthServerMetadataView):
    """DOT's RFC 8414 metadata, with the algorithms a ``private_key_jwt`` assertion may use, and
    introspection as ``ResourceServerIntrospectionView`` serves it (or not at all)."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        if id_jag.trusted_providers():
            # Enterprise-Managed Authorization: advertised only while an IdP is trusted for it.
            data["grant_types_supported"] = [*data.get("grant_types_supported", []), id_jag.GRANT_TYPE]
            data["authorization_grant_profiles_supported"] = [id_jag.PROFILE]
        if assertions.PRIVATE_KEY_JWT in data.get("token_endpoint_auth_methods_supported", ()):
            data["token_endpoint_auth_signing_alg_values_supported"] = list(assertions.SIGNING_ALGORITHMS)
        if not policy.dcr_enabled():  # the operator's policy: nobody may register
            data.pop("registration_endpoint", None)
        if settings.CODEX_INTROSPECTION_CLIENTS:
            data["introspection_endpoint_auth_methods_supported"] = list(INTROSPECTION_AUTH_METHODS)
        else:  # nobody may introspect: nothing to advertise
            data.pop("introspection_endpoint", None)
            data.pop("introspection_endpoint_auth_methods_supported", None)
        answer = JsonResponse(data)
        answer["Access-Control-Allow-Origin"] = response["Access-Control-Allow-Origin"]
        return answer


@method_decorator(csrf_exempt, name="dispatch")
class CheckedRegistrationManagementView(ParametersFirst, GuardedRegistrationManagementView):
    """RFC 7592 client configuration, its headers read first (``authserver.oauth.parameters``)."""

    endpoint = parameters.REGISTRATION


@method_decorator(csrf_exempt, name="dispatch")
class CodexRevokeTokenView(ParametersFirst, RevokeTokenView):
    """RFC 7009 revocation, its parameters read first (``authserver.oauth.parameters``); the
    client authenticates as at the token endpoint (``authserver.clients.authentication``)."""

    endpoint = parameters.REVOCATION


@method_decorator(csrf_exempt, name="dispatch")
class ResourceServerIntrospectionView(ParametersFirst, IntrospectTokenView):
    """RFC 7662 introspection, for the resource servers an operator provisions only: a
    confidential client whose id is in ``CODEX_INTROSPECTION_CLIENTS``, with its secret (Basic or
    the body, as the metadata says), as ``authserver.clients.authentication`` verified it. Anyone
    else gets 401 (or that function's other refusals: 400 for credentials in two places, 429 past
    the failures' limits) before any token is looked at: a client registered a moment ago learns
    nothing of other people's tokens. POST only (a token in a URL ends up in logs)."""

    http_method_names = ["post", "options"]
    endpoint = parameters.INTROSPECTION
    refusal: errors.OAuth2Error | None = None

    def authenticate_client(self, request: HttpRequest) -> bool:
        # DOT's wrapper hands the request to the validator's authenticate_client, which is
        # authserver.clients.authentication's one door: it admits only a listed resource server,
        # by the secret it verified, and raises saying why for anyone else.
        try:
            return super().authenticate_client(request)
        except errors.OAuth2Error as refused:
            self.refusal = refused
            return False

    def verify_request(self, request: HttpRequest) -> tuple[bool, Any]:
        # DOT also lets a bearer token with an "introspection" scope in; no token of this server
        # has one, and only provisioned clients may introspect.
        return False, None

    def unauthenticated_response(self, request: HttpRequest, oauthlib_request: Any = None) -> HttpResponse:
        refusal = self.refusal or errors.InvalidClientError(
            description="Only the resource servers this server's operator provisions may introspect tokens"
        )
        response = HttpResponse(refusal.json, status=refusal.status_code, content_type="application/json")
        for name, value in refusal.headers.items():
            response[name] = value
        if refusal.status_code == 401:
            response["WWW-Authenticate"] = 'Basic realm="introspection"'
        return never_cached(response)

    def get_token_response(self, token_value: str | None = None) -> HttpResponse:
        # DOT's (a documented view method) judges a token by its own is_valid(): expiry and
        # scopes. A token is active here exactly when /mcp would take it: the one check
        # (authserver.core.token_check), which also asks the resource and whether its person may
        # hold tokens; its row is then read for what introspection shows of it.
        if token_value is None:
            return oauth_error("invalid_request", "Send the token to introspect as the token parameter")
        checksum = token_checksum(token_value)
        try:
            check_access_token(checksum)
        except TokenRefused:
            return never_cached(JsonResponse({"active": False}))
        token = get_access_token_model().objects.select_related("user", "application").get(token_checksum=checksum)
        data = {"active": True, "scope": token.scope, "exp": int(token.expires.timestamp()), "aud": token.resource}
        if token.application is not None:
            data["client_id"] = token.application.client_id
        data["username"] = token.user.get_username()
        return never_cached(JsonResponse(data))
