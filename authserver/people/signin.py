"""Signing in with a password, through django-allauth, and its throttle.

Every place this server checks a person's password goes through allauth's adapter
``authenticate``: the sign-in page, the admin's sign-in (``secure_admin_login`` sends it
here), reauthentication before a sensitive change, and the current password on the
password-change form (``CodexChangePasswordForm``). Each attempt is counted by allauth's
``login_failed`` rate limit, per account and per client address (``ACCOUNT_RATE_LIMITS``);
a success takes its own attempt back. Past either limit an attempt is refused before the
password is looked at (the right one too) until the oldest failure leaves its window: a
temporary refusal, never a lock an attacker could make permanent; and a browser the person
signed in with before is counted apart (``authserver.people.devices``), so that an attacker who keeps
guessing locks out only the browsers that never signed in. The person reads how
long to wait; the refusal is counted (``codex_limit_refusals{kind="sign_in_failures"}``)
and logged once, as a WARNING, with the account and address but never the password.

A person of a domain the operator's policy sends to single sign-on (``CODEX_SSO_ONLY_DOMAINS``,
``authserver.core.policy``) is refused after their password is found right.

Nobody signs up with a password: operators add people (``codex_adduser``), and a single
sign-on provider may (``authserver.enterprise.sso``).
"""

import logging
import math
from typing import Any

from allauth.account.adapter import DefaultAccountAdapter, get_adapter
from allauth.account.forms import ChangePasswordForm
from allauth.core import context
from allauth.core.internal import ratelimit as allauth_ratelimit
from django.core.cache import cache
from django.core.exceptions import ValidationError
from django.http import HttpRequest

import codex_metrics
from authserver.core import policy
from authserver.people.devices import known_device
from common.ratelimit import client_address, client_network
from common.redirects import safe_next

logger = logging.getLogger(__name__)

THROTTLED = "too_many_login_attempts"


def wait_words(seconds: int) -> str:
    """``"3 minutes"``, ``"1 minute"``, ``"40 seconds"``: how long, in words a person reads."""
    if seconds >= 90:
        minutes = math.ceil(seconds / 60)
        return f"{minutes} minutes"
    if seconds >= 60:
        return "1 minute"
    return f"{seconds} second{'' if seconds == 1 else 's'}"


def attempts_key(login: str) -> str:
    """The key of an account's failed attempts: its login, in lower case. (allauth's own
    prefixes the site's domain, which without django.contrib.sites is the request's Host
    header, port included: each port an attacker wrote there would count apart.)"""
    return login.lower()


def login_failed_wait(request: HttpRequest, key: str) -> int:
    """Seconds until allauth's ``login_failed`` limit lets the next attempt for ``key`` (the
    account) from this request's address through: for each of its rates that is full, until
    the failure that filled it leaves the window. (allauth says only "try again later"; this
    reads its counters the way it keeps them: each rate's list of attempt times, newest first,
    under ``get_cache_key``'s key, registered in common.internals.)"""
    now = allauth_ratelimit.time.time()
    wait = 0.0
    for rate in allauth_ratelimit.get_rates(app="allauth.account", action="login_failed"):
        cache_key = allauth_ratelimit.get_cache_key(
            request, app="allauth.account", action="login_failed", rate=rate, key=key
        )
        history = [moment for moment in cache.get(cache_key, []) if moment > now - rate.duration]
        if len(history) >= rate.amount:
            wait = max(wait, history[rate.amount - 1] + rate.duration - now)
    return max(1, math.ceil(wait))


class CodexAccountAdapter(DefaultAccountAdapter):
    """allauth's account adapter with this server's rules: no sign-up with a password, the
    client address as uvicorn reports it, a throttle refusal that says how long, and a ``next``
    followed only where the query's would be kept."""

    error_messages = {
        **DefaultAccountAdapter.error_messages,
        "username_password_mismatch": "Your username and password did not match. Please try again.",
    }

    def is_open_for_signup(self, request: HttpRequest) -> bool:
        return False

    def add_message(
        self, request: HttpRequest, level: int, message_template: str | None = None, *args: Any, **kwargs: Any
    ) -> None:
        # Signing out has the site's own message (authserver.signals), which says what stays connected.
        if message_template == "account/messages/logged_out.txt":
            return
        super().add_message(request, level, message_template, *args, **kwargs)

    def is_safe_url(self, url: str | None) -> bool:
        # Every next allauth follows (get_next_redirect_url: a posted one, a query's) is judged
        # as the query's is (codex_site.middleware): the request's own host only, never the other
        # ALLOWED_HOSTS and CSRF_TRUSTED_ORIGINS that allauth's own rule allows.
        request = context.request
        return request is not None and safe_next(request, url)

    def get_client_ip(self, request: HttpRequest) -> str:
        # uvicorn applies X-Forwarded-For from trusted proxies only (CODEX_TRUSTED_PROXIES).
        # allauth counts per this "address": the client's network, as every other limit of this
        # server counts it (an IPv6 address's /64; allauth's own truncation leaves it as it is).
        return client_network(request)

    def _get_login_attempts_cache_key(self, request: HttpRequest, **credentials: Any) -> str:
        # The username first: reauthentication passes the account's email address too.
        key = attempts_key(credentials.get("username") or credentials.get("email") or "")
        # A browser that signed in to this account before is counted apart (authserver.people.devices).
        known = known_device(request)
        if known is not None and attempts_key(known[0].get_username()) == key:
            return f"{key}:device:{known[1]}"
        return key

    def authenticate(self, request: HttpRequest, **credentials: Any) -> Any:
        user = super().authenticate(request, **credentials)
        # The operator's policy (CODEX_SSO_ONLY_DOMAINS): a person of a listed domain signs in
        # with single sign-on only. Judged only once the password was found right, so that the
        # refusal tells someone without it nothing (a wrong password gets the ordinary error),
        # and on every password check (sign-in, the admin's, reauthentication, the current
        # password of a change), so that a password an operator sets opens nothing either.
        if user is not None and (domain := policy.sso_only_domain(user)) is not None:
            policy.refused(policy.SSO_ONLY_DOMAINS, user_id=user.pk, reason=f"password sign-in for {domain}")
            raise ValidationError(policy.sso_only_message(domain), code="sso_only")
        return user

    def pre_authenticate(self, request: HttpRequest, **credentials: Any) -> None:
        try:
            super().pre_authenticate(request, **credentials)
        except ValidationError as error:
            if getattr(error, "code", None) != THROTTLED:
                raise
            key = self._get_login_attempts_cache_key(request, **credentials)
            wait = login_failed_wait(request, key)
            codex_metrics.limit_refused("sign_in_failures")
            logger.warning(
                "sign-in refused: too many failed attempts for account %r or from address %s; "
                "the next is allowed in %d s",
                credentials.get("username", ""),
                client_address(request),
                wait,
            )
            raise ValidationError(
                "Too many failed sign-ins for this account or from your network. Nothing was checked; "
                f"try again in {wait_words(wait)}.",
                code=THROTTLED,
            ) from None


class CodexChangePasswordForm(ChangePasswordForm):
    """allauth's password change, whose current password is checked as a sign-in is (the
    same throttle, per account and address), not by a bare ``check_password``."""

    def clean_oldpassword(self) -> str:
        password = self.cleaned_data.get("oldpassword", "")
        if not get_adapter().reauthenticate(self.user, password):
            raise get_adapter().validation_error("enter_current_password")
        return password
