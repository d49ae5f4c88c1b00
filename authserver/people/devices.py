"""Known devices: the browsers a person has signed in with, which the sign-in throttle leaves
out of the lock that failed guesses put on an account.

The throttle (``authserver.people.signin``) refuses an account's sign-ins for a while after a few
failures, whoever made them. Alone, that lets anyone who keeps guessing keep the account's own
person out for as long as they keep going. So, as OWASP's "device cookies" advise, a successful
sign-in gives the browser a signed cookie naming the account and a device id of its own, and a
sign-in for that account from a browser holding it is counted apart, per device: the person
signs in from a known browser while an attacker is locked out, and the same few failures lock
only that browser. The per-address limit applies to every attempt alike. The cookie is signed
with ``SECRET_KEY`` (it cannot be made for another account or forged) and names the account by
its id, with a stamp derived from its password hash: it counts only for that very account (not
for a later account given the same username) and only until its password changes (a changed
password is how a person takes their account back) or the account is deleted. It carries no
secret of the account, and only ever widens the throttle for one device.
"""

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.http import HttpRequest, HttpResponseBase
from django.utils.crypto import constant_time_compare, salted_hmac

COOKIE = "codex_device"
SALT = "authserver.people.devices"
MAX_AGE_SECONDS = 365 * 24 * 3600


def _stamp(user) -> str:
    """Changes whenever the account's password does (and tells nothing of it)."""
    return salted_hmac(SALT, f"{user.pk}:{user.password}", algorithm="sha256").hexdigest()[:32]


def remember(response: HttpResponseBase, user) -> None:
    """Mark the browser that just signed in to ``user`` as a known device of that account."""
    value = signing.dumps(
        {"user": user.pk, "stamp": _stamp(user), "device": secrets.token_urlsafe(12)}, salt=SALT, compress=True
    )
    response.set_cookie(
        COOKIE,
        value,
        max_age=MAX_AGE_SECONDS,
        path="/",
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def known_device(request: HttpRequest):
    """``(account, device id)`` when this browser is a known device of an account (the cookie
    names it by id, and its password is what it was when the cookie was set), else None."""
    value = request.COOKIES.get(COOKIE)
    if not value:
        return None
    try:
        marked = signing.loads(value, salt=SALT, max_age=MAX_AGE_SECONDS)
    except (signing.BadSignature, ValueError):
        return None
    if not isinstance(marked, dict) or not isinstance(marked.get("device"), str):
        return None
    if not isinstance(marked.get("user"), int) or not isinstance(marked.get("stamp"), str):
        return None  # an older cookie, naming the account by its username: no longer honoured
    user = get_user_model().objects.filter(pk=marked["user"]).first()
    if user is None or not constant_time_compare(marked["stamp"], _stamp(user)):
        return None
    return user, marked["device"]
