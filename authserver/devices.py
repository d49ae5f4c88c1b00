"""Known devices: the browsers a person has signed in with, which the sign-in throttle leaves
out of the lock that failed guesses put on an account.

The throttle (``authserver.signin``) refuses an account's sign-ins for a while after a few
failures, whoever made them. Alone, that lets anyone who keeps guessing keep the account's own
person out for as long as they keep going. So, as OWASP's "device cookies" advise, a successful
sign-in gives the browser a signed cookie naming the account and a device id of its own, and a
sign-in for that account from a browser holding it is counted apart, per device: the person
signs in from a known browser while an attacker is locked out, and the same few failures lock
only that browser. The per-address limit applies to every attempt alike. The cookie is signed
with ``SECRET_KEY`` (it cannot be made for another account or forged), carries no secret of
the account, and only ever widens the throttle for one device.
"""

import secrets

from django.conf import settings
from django.core import signing
from django.http import HttpRequest, HttpResponseBase

COOKIE = "codex_device"
SALT = "authserver.devices"
MAX_AGE_SECONDS = 365 * 24 * 3600


def remember(response: HttpResponseBase, login: str) -> None:
    """Mark the browser that just signed in to ``login`` (its attempts key) as a known device."""
    value = signing.dumps({"login": login, "device": secrets.token_urlsafe(12)}, salt=SALT, compress=True)
    response.set_cookie(
        COOKIE,
        value,
        max_age=MAX_AGE_SECONDS,
        path="/",
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def known_device(request: HttpRequest, login: str) -> str | None:
    """The id of this browser as a known device of ``login``, or None."""
    value = request.COOKIES.get(COOKIE)
    if not value:
        return None
    try:
        marked = signing.loads(value, salt=SALT, max_age=MAX_AGE_SECONDS)
    except (signing.BadSignature, ValueError):
        return None
    if not isinstance(marked, dict) or marked.get("login") != login or not isinstance(marked.get("device"), str):
        return None
    return marked["device"]
