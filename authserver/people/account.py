"""The person's account pages: sign-in (password and single sign-on), the account page
(password, second factor, connected applications, leaving), deleting one's account, and
the page for allauth's other rate limits."""

import logging
import time
from collections.abc import Callable
from functools import wraps
from typing import Any

from allauth.account import views as account_views
from allauth.account.authentication import get_authentication_records
from allauth.account.decorators import reauthentication_required
from allauth.account.utils import get_next_redirect_url
from allauth.mfa.models import Authenticator
from allauth.socialaccount.models import SocialAccount
from csp.decorators import csp_replace
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

import codex_metrics
from authserver.core.sso_config import provider_origins
from authserver.people import leaving
from common.ratelimit import client_address

logger = logging.getLogger(__name__)


def provider_names() -> dict[str, str]:
    """Each single sign-on provider's display name, by its id (in the operator's order)."""
    return {provider["id"]: provider["name"] for provider in settings.CODEX_SSO_PROVIDERS}


def sso_providers() -> list[dict[str, str]]:
    return [{"id": provider_id, "name": name} for provider_id, name in provider_names().items()]


def leading_to_providers(respond: Callable[[], HttpResponse]) -> HttpResponse:
    """``respond()``, for a page whose forms post here and are sent on to a single sign-on
    provider: CSP's form-action covers a form's redirects too, so it names each provider's
    origin (its issuer's; read when the page is made, as tests change them)."""
    return csp_replace({"form-action": ["'self'", *provider_origins(settings.CODEX_SSO_PROVIDERS)]})(respond)()


class CodexLoginView(account_views.LoginView):
    """allauth's sign-in with each single sign-on provider beside the password form (which
    ``CODEX_PASSWORD_SIGNIN=0`` turns off), and who is signed in already, if anyone."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not settings.CODEX_PASSWORD_SIGNIN:
            return render(
                request,
                "account/login.html",
                {**self.extra_context_data(), "form": None, "refused": True},
                status=403,
            )
        return super().post(request, *args, **kwargs)

    def extra_context_data(self) -> dict[str, Any]:
        return {
            "providers": sso_providers(),
            "password_signin": settings.CODEX_PASSWORD_SIGNIN,
            # Only a next on this site (allauth's check; codex_site.middleware drops others too).
            "next": get_next_redirect_url(self.request) or "",
        }

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), **self.extra_context_data()}

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return leading_to_providers(lambda: super(CodexLoginView, self).dispatch(request, *args, **kwargs))


@login_required
def password_change(request: HttpRequest) -> HttpResponse:
    """allauth's password change, for accounts that have a password (single sign-on ones do not)."""
    if not request.user.has_usable_password():
        messages.info(request, "Your account signs in through single sign-on; it has no password here.")
        return redirect("account")
    return account_views.password_change(request)


@login_required
@require_http_methods(["GET"])
def account_page(request: HttpRequest) -> HttpResponse:
    user = request.user
    authenticators = {kind: 0 for kind in ("totp", "webauthn", "recovery_codes")}
    for kind in Authenticator.objects.filter(user=user).values_list("type", flat=True):
        authenticators[kind] = authenticators.get(kind, 0) + 1
    names = provider_names()
    linked = [
        names.get(account.provider, account.provider)
        for account in SocialAccount.objects.filter(user=user).order_by("provider")
    ]
    context = {
        "has_password": user.has_usable_password(),
        "authenticators": authenticators,
        "second_factor": authenticators["totp"] or authenticators["webauthn"],
        "linked": linked,
        "clients": leaving.connected_count(user=user),
    }
    return render(request, "account/index.html", context)


class DeleteAccountForm(forms.Form):
    confirmation = forms.CharField(max_length=200)

    def __init__(self, *args: Any, phrase: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.phrase = phrase

    def clean_confirmation(self) -> str:
        value = self.cleaned_data["confirmation"]
        if value.strip() != self.phrase:
            raise forms.ValidationError(f"Type “{self.phrase}” exactly to confirm.")
        return value


def _signed_in_through_provider_lately(request: HttpRequest) -> bool:
    """Whether this session's latest single sign-on is within the reauthentication timeout."""
    moments = [
        record.get("at", 0)
        for record in get_authentication_records(request, request.user)
        if record.get("method") == "socialaccount"
    ]
    return bool(moments) and time.time() - max(moments) < settings.ACCOUNT_REAUTHENTICATION_TIMEOUT


def sso_signed_in_again(view):
    """allauth's reauthentication asks for a password; an account without one (single sign-on)
    would pass it untouched, so it must have come back from its provider lately instead."""

    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.has_usable_password() or _signed_in_through_provider_lately(request):
            return view(request, *args, **kwargs)
        names = provider_names()
        linked = [
            {"id": account.provider, "name": names[account.provider]}
            for account in SocialAccount.objects.filter(user=request.user).order_by("provider")
            if account.provider in names
        ]
        context = {"providers": linked, "next": request.path}
        return leading_to_providers(lambda: render(request, "account/sso_reauthenticate.html", context))

    return checked


@login_required
@require_http_methods(["GET", "POST"])
@sso_signed_in_again
@reauthentication_required
def delete_account(request: HttpRequest) -> HttpResponse:
    """Delete the signed-in person's account and everything of theirs, after they signed in
    again (allauth's reauthentication, or their provider's for a single sign-on account) and
    typed their username."""
    user = request.user
    phrase = user.get_username()
    form = DeleteAccountForm(request.POST or None, phrase=phrase)
    if request.method == "POST" and form.is_valid():
        report = leaving.account_delete(user=user, by="person")
        logger.info("account deleted by its owner: %s", report.summary())
        logout(request)
        messages.info(request, "Your account and everything in it are deleted.")
        return redirect("/")
    summary = leaving.what_goes(user=user)
    return render(request, "account/delete.html", {"form": form, "phrase": phrase, "summary": summary})


def too_many_requests(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """allauth's rate limits (besides the sign-in throttle): counted, logged once, a page."""
    codex_metrics.limit_refused("account_actions")
    logger.warning("account action refused by its rate limit: %s from %s", request.path, client_address(request))
    response = render(
        request,
        "authserver/rate_limited.html",
        {"retry_after": 60, "what": "attempts at this"},
        status=429,
    )
    response["Retry-After"] = "60"
    return response
