"""Whether a ``next`` URL stays on this site: one answer for every door that reads one.

A ``next`` is followed after signing in, reauthenticating or signing out, and rendered into
links and hidden fields. Two doors read it: the query string's, dropped before any view sees
it when it leads off the site (``codex_site.middleware.UnsafeNextMiddleware``), and every
``next`` allauth follows, a form's posted one included (its adapter's ``is_safe_url``,
``authserver.people.signin.CodexAccountAdapter``). Both ask ``safe_next``.

This site is the request's own host, exactly, and over HTTPS when the request came over HTTPS
(Django's ``url_has_allowed_host_and_scheme``). Not every name in ``ALLOWED_HOSTS``, nor a host of
``CSRF_TRUSTED_ORIGINS`` (allauth's own rule allows both): ``localhost``, ``127.0.0.1`` and
``[::1]`` are all allowed hosts, and each may reach another server on another port, or hold
another site's cookies; a ``.domain`` pattern allows every name under it.
"""

from django.http import HttpRequest
from django.utils.http import url_has_allowed_host_and_scheme


def safe_next(request: HttpRequest, url: str | None) -> bool:
    """Whether ``url`` stays on this site: relative, or absolute on the request's own host (its
    port included), over HTTPS when the request is."""
    return url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()}, require_https=request.is_secure())
