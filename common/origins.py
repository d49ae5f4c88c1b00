"""Which browser origins may call this server: one answer for /mcp and the OAuth endpoints.

``CODEX_ALLOWED_ORIGINS`` lists origins (scheme://host[:port]). A request's ``Origin``
matches one when scheme, host and port agree, with two conveniences a person expects:
default ports are implied (``http://x`` is ``http://x:80``), and the loopback names
``localhost``, ``127.0.0.1`` and ``[::1]`` are one host, since on a local server they
reach the same process (``http://localhost:8000`` matches ``http://127.0.0.1:8000``).
Nothing else is widened: another port, another scheme or another host does not match.
"""

from urllib.parse import urlsplit

from django.conf import settings

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_key(origin: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) with loopback names folded into one, or None if not an origin."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    if scheme not in DEFAULT_PORTS or not host or parts.path not in {"", "/"} or parts.query or parts.username:
        return None
    if host in LOOPBACK_HOSTS:
        host = "loopback"
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def origin_allowed(origin: str | None) -> bool:
    """Whether a browser on ``origin`` may call /mcp and the OAuth endpoints cross-origin."""
    if not origin:
        return False
    key = origin_key(origin)
    return key is not None and any(key == origin_key(allowed) for allowed in settings.CODEX_ALLOWED_ORIGINS)
