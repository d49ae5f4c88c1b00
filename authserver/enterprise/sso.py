"""Single sign-on through OpenID Connect providers (allauth's generic ``openid_connect``
provider; the operator lists them in ``CODEX_OIDC_PROVIDERS``, read by
``authserver.core.sso_config``).

- Only a verified email of one of the provider's allowed domains signs in; anything else is
  refused with a page that names the domains, before any account is made or matched.
- A first sign-in of a person an organization provisioned through SCIM signs in to that
  account (``authserver.enterprise.scim.links``).
- Any other first sign-in makes an account (its codex is made on first use, as for everyone). It
  signs in to an existing local account instead only where the operator allows it for
  that provider (``match_existing``), and only through that verified email.
- A provider that cannot be reached, or answers what OpenID Connect does not allow, gets
  a page that says so (``provider_views``), never a 500. Its every answer is read as any
  stranger's JSON is (``common.inputs.json_document``, through the adapter's requests session).
"""

import logging
from collections.abc import Callable
from typing import Any

import requests
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.providers.openid_connect import views as oidc_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from authserver.core.emails import domain_allowed
from authserver.enterprise.addresses import accounts_named_by
from authserver.enterprise.scim import links
from authserver.people.account import leading_to_providers
from common.inputs import JSONRefused, json_document

logger = logging.getLogger(__name__)


def allowed_domains(provider: Any) -> list[str]:
    app = getattr(provider, "app", None)
    return list((getattr(app, "settings", None) or {}).get("codex_domains", []))


def verified_emails(sociallogin: Any) -> list[str]:
    """The addresses the provider says are verified: ``email_verified`` exactly true (OpenID
    Connect's boolean; a provider's string "false" is truthy, so truthiness will not do)."""
    return [
        address.email
        for address in sociallogin.email_addresses
        if address.verified is True and isinstance(address.email, str) and address.email
    ]


def refusal_page(request: HttpRequest, *, provider_name: str, reason: str, status: int) -> HttpResponse:
    return render(
        request,
        "socialaccount/refused.html",
        {"provider_name": provider_name, "reason": reason},
        status=status,
    )


def _read_as_a_strangers_json(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """A response hook (requests' documented ``hooks``) on every request allauth makes to a
    provider: the answer's ``json()``, which allauth reads the discovery document, the token answer,
    the user info and the key set with, reads it as any stranger's JSON is
    (``common.inputs.json_document``). A refusal is requests' own ``InvalidJSONError`` (a
    ``RequestException``), which allauth's callback answers as the provider's failure, and
    ``_guarded`` below for the discovery document read before the redirect."""

    def json(**_: Any) -> Any:
        try:
            return json_document(response.content)
        except JSONRefused as refused:
            problem = refused.problem.removeprefix("it ")
            raise requests.exceptions.InvalidJSONError(f"the provider's answer {problem}", response=response) from None

    response.json = json  # type: ignore[method-assign]


class CodexSocialAccountAdapter(DefaultSocialAccountAdapter):
    def get_requests_session(self) -> requests.Session:
        # Every request allauth's OpenID Connect provider makes goes through this session
        # (registered in common.internals: allauth does not document the method).
        session = super().get_requests_session()
        session.hooks["response"].append(_read_as_a_strangers_json)
        return session

    def is_open_for_signup(self, request: HttpRequest, sociallogin: Any) -> bool:
        # The domain check in pre_social_login has already let this person through; whether an
        # unknown person gets an account is the provider's "signup" (an ID-JAG follows it too).
        settings = getattr(sociallogin.provider.app, "settings", None) or {}
        return bool(settings.get("codex_signup", True))

    def pre_social_login(self, request: HttpRequest, sociallogin: Any) -> None:
        provider = sociallogin.provider
        domains = allowed_domains(provider)
        emails = [email for email in verified_emails(sociallogin) if domain_allowed(email, domains)]
        if not emails:
            shown = "any domain" if "*" in domains else ", ".join(f"@{domain}" for domain in domains)
            logger.warning(
                "single sign-on refused: %s answered no verified email of an allowed domain", provider.app.provider_id
            )
            raise ImmediateHttpResponse(
                refusal_page(
                    request,
                    provider_name=provider.name,
                    reason=f"This server accepts {provider.name} accounts with a verified email address at "
                    f"{shown}, and {provider.name} did not give one for your account.",
                    status=403,
                )
            )
        if not sociallogin.is_existing:
            # A person their organization provisioned through SCIM (authserver.enterprise.scim.links):
            # this first sign-in is linked to that account.
            provisioned = links.provisioned_account(provider_id=provider.app.provider_id, emails=emails)
            if provisioned is not None:
                sociallogin.connect(request, provisioned)
        if not sociallogin.is_existing and accounts_named_by(emails).exists():
            # Not matched to that account (the operator did not allow it for this provider):
            # a second account with the same address would be a trap for its owner.
            logger.warning(
                "single sign-on refused: %s answered the address of an existing account, and does not match them",
                provider.app.provider_id,
            )
            raise ImmediateHttpResponse(
                refusal_page(
                    request,
                    provider_name=provider.name,
                    reason=f"An account with your address already exists on this server, and this server does not "
                    f"sign {provider.name} accounts in to existing ones. Sign in with that account's password, or "
                    "ask whoever runs this server to connect them.",
                    status=409,
                )
            )
        # Only an allowed, verified address names the account (and its username).
        sociallogin.email_addresses = [
            address for address in sociallogin.email_addresses if address.verified is True and address.email in emails
        ]
        if not sociallogin.is_existing and getattr(sociallogin.user, "email", "") not in emails:
            sociallogin.user.email = emails[0]

    def can_authenticate_by_email(self, login: Any, email: str) -> bool:
        """Matching an existing account by email: only where the operator allows it for this
        provider, and only for an allowed domain (the address is verified: allauth asks
        only about verified ones)."""
        settings = getattr(login.provider.app, "settings", None) or {}
        return bool(settings.get("email_authentication")) and domain_allowed(email, allowed_domains(login.provider))

    def on_authentication_error(
        self, request: HttpRequest, provider: Any, error: Any = None, exception: Any = None, extra_context: Any = None
    ) -> None:
        # One line for the operator; the person gets allauth's authentication_error page.
        logger.warning(
            "single sign-on with %s failed: %s%s",
            getattr(getattr(provider, "app", None), "provider_id", provider),
            error,
            f" ({type(exception).__name__})" if exception is not None else "",
        )


# What a provider that is down or answers wrongly can make allauth raise outside the
# errors its callback view catches (discovery is fetched before the redirect, and a
# discovery document without an endpoint is a KeyError). An answer that is not JSON this server
# reads never reaches allauth: it is requests' InvalidJSONError (``_read_as_a_strangers_json``).
PROVIDER_FAULTS = (OSError, ValueError, LookupError, TypeError, AttributeError)


def _guarded(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    def guarded(request: HttpRequest, provider_id: str) -> HttpResponse:
        try:
            return view(request, provider_id)
        except ImmediateHttpResponse as immediate:
            return immediate.response
        except Exception as error:
            if not isinstance(error, (requests.RequestException, *PROVIDER_FAULTS)):
                raise
            logger.warning("single sign-on provider %s could not be used: %s", provider_id, type(error).__name__)
            response = render(
                request,
                "socialaccount/provider_unavailable.html",
                {"provider_id": provider_id},
                status=502,
            )
            # Logged above in one line, as the provider's fault; Django would log a 5xx again at ERROR.
            response._has_been_logged = True  # type: ignore[attr-defined]
            return response

    guarded.login_required = False  # type: ignore[attr-defined]
    return guarded


def _login(request: HttpRequest, provider_id: str) -> HttpResponse:
    # A GET asks first (socialaccount/login.html); its form's answer redirects to the provider,
    # which the page's form-action must name, as the sign-in page's does.
    return leading_to_providers(lambda: oidc_views.login(request, provider_id))


login = _guarded(_login)
callback = _guarded(oidc_views.callback)
