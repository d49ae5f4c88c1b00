"""Holding password accounts to a second factor (allauth.mfa does the factors themselves).

``CODEX_REQUIRE_MFA=1``: every account that signs in with a password must have a TOTP
authenticator or a passkey; ``CODEX_REQUIRE_MFA_STAFF=1``: staff accounts must (the admin's
operators), whatever the first says. Such an account, signed in without one, is sent to
set one up before any other page of the site (the admin and the OAuth consent page
included): it may see only the pages that set one up, sign out, and static files. An
account that signs in only through single sign-on has no password here, and its
provider's own policy is its second factor.
"""

from collections.abc import Callable

from allauth.mfa.adapter import DefaultMFAAdapter
from allauth.mfa.models import Authenticator
from django.conf import settings
from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect

# What a person held to it may still reach: setting a factor up (and signing in again for
# it), signing out, the static files those pages use and the site's icon.
ALLOWED_PREFIXES = (
    "/accounts/2fa/",
    "/accounts/reauthenticate/",
    "/accounts/logout/",
    "/static/",
    "/favicon.ico",
)
FACTORS = (Authenticator.Type.TOTP, Authenticator.Type.WEBAUTHN)


def held_to_second_factor(user) -> bool:
    """Whether this signed-in account must have a second factor (and so far has none)."""
    if not user.is_authenticated or not user.has_usable_password():
        return False
    if not (settings.CODEX_REQUIRE_MFA or (settings.CODEX_REQUIRE_MFA_STAFF and user.is_staff)):
        return False
    return not Authenticator.objects.filter(user=user, type__in=FACTORS).exists()


class RequireSecondFactorMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if (
            (settings.CODEX_REQUIRE_MFA or settings.CODEX_REQUIRE_MFA_STAFF)
            and not request.path.startswith(ALLOWED_PREFIXES)
            and held_to_second_factor(request.user)
        ):
            messages.warning(
                request,
                "This server asks every account that signs in with a password for a second factor. "
                "Set one up to continue: an authenticator app or a passkey.",
                fail_silently=True,
            )
            return redirect("mfa_index")
        return self.get_response(request)


class CodexMFAAdapter(DefaultMFAAdapter):
    """allauth's second-factor adapter (``MFA_ADAPTER``), in the site's words."""

    def generate_authenticator_name(self, user, type: Authenticator.Type) -> str:
        # The name of a passkey added with the name left empty (the page suggests none; the
        # library's suggestion was "Master key").
        count = Authenticator.objects.filter(user_id=user.pk, type=type).count()
        return f"Passkey {count + 1}"
