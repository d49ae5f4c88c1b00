"""``DATABASE_URL`` to Django's ``DATABASES["default"]``, including libpq's multi-host form.

A replicated PostgreSQL is named by every node and asks for the writable one::

    postgresql://codex:secret@10.0.0.1:5432,10.0.0.2:5432,10.0.0.3:5432/codex?target_session_attrs=read-write

libpq (and psycopg, which tries the hosts in order) connects to the first node that
accepts a read-write session, so after a failover the next new connection finds the new
primary without any change here. dj-database-url refuses that URL (``urlsplit`` cannot
read a port out of ``h1:p1,h2:p2``), so the host list is taken out first, the rest is
parsed by dj-database-url as a one-host URL, and the hosts and ports are put back as
libpq's comma-separated ``host`` and ``port`` lists, which Django's PostgreSQL backend
passes to psycopg unchanged.
"""

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

import dj_database_url

# Seconds psycopg waits for each host before trying the next (libpq's connect_timeout;
# psycopg's own default is 130 s per host). A node that is down but not refusing (a lost
# host, a dropped packet) then costs a call this long per host, not minutes; a URL that
# sets connect_timeout itself wins.
CONNECT_TIMEOUT_SECONDS = 3
# Milliseconds data sent on a connection may stay unacknowledged before the kernel drops the
# connection (libpq's tcp_user_timeout). A database host that vanished, or a network that lost
# its answers, acknowledges nothing: without it a statement waits for TCP to give up, many
# minutes, past every client's timeout (deploy/try_network.sh, "application host cut off").
# With it the call answers `unavailable` after this long and the next one reconnects. A commit
# waiting for the synchronous standby is not affected: the server's kernel acknowledges the
# COMMIT at once, whatever the server then waits for.
TCP_USER_TIMEOUT_MS = 5000
# An idle connection (persistent, or in the pool) is probed after 10 s of silence, so that one
# to a host that vanished is found broken before a call picks it (the backend's health check
# sees the socket's error), instead of costing that call the timeout above.
KEEPALIVE_OPTIONS = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}

_POSTGRES_ENGINES = {"django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis", "codex_site.postgresql"}
# Django's PostgreSQL backend with a health check that costs no round trip on a quiet
# connection (codex_site.postgresql.base).
POSTGRESQL_ENGINE = "codex_site.postgresql"
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<netloc>[^/?#]*)(?P<rest>.*)$", re.DOTALL)
_HOST = re.compile(r"^(?:\[(?P<ipv6>[^\]]*)\]|(?P<name>[^:]*))(?::(?P<port>\d*))?$")


class DatabaseURLError(ValueError):
    """The URL cannot be read; the message says which part and never repeats a password."""


def _split_host(spec: str) -> tuple[str, str]:
    match = _HOST.match(spec)
    if match is None or not (match["ipv6"] or match["name"]):
        raise DatabaseURLError(f"DATABASE_URL: cannot read host {spec!r} of its host list")
    return unquote(match["ipv6"] or match["name"]), match["port"] or ""


def database_settings(
    url: str,
    *,
    conn_max_age: int,
    conn_health_checks: bool = True,
    postgresql_options: Mapping[str, Any] | None = None,
    pool: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``DATABASES`` entry for ``url``: dj-database-url's, plus a host list if given.

    On PostgreSQL: this project's backend (``POSTGRESQL_ENGINE``), ``postgresql_options``
    under the URL's own (the URL wins), and with ``pool`` Django's connection pool
    (psycopg_pool's options) instead of persistent connections, which Django refuses with it.
    """
    match = _SCHEME.match(url)
    hosts: list[tuple[str, str]] = []
    if match and "," in match["netloc"]:
        userinfo, _, host_list = match["netloc"].rpartition("@")
        hosts = [_split_host(spec) for spec in host_list.split(",")]
        # dj-database-url reads everything else (user, password, database, options) from a
        # one-host URL; the host put there is replaced below.
        one_host = f"{userinfo}@placeholder" if userinfo else "placeholder"
        url = f"{match['scheme']}://{one_host}{match['rest']}"
    database = dj_database_url.parse(url, conn_max_age=conn_max_age, conn_health_checks=conn_health_checks)
    if hosts:
        if database["ENGINE"] not in _POSTGRES_ENGINES:
            raise DatabaseURLError("DATABASE_URL: a list of hosts is understood for PostgreSQL only")
        database["HOST"] = ",".join(host for host, _port in hosts)
        # libpq: one port per host (an empty one means the default), or none at all.
        ports = [port for _host, port in hosts]
        database["PORT"] = ",".join(ports) if any(ports) else ""
    if database["ENGINE"] in _POSTGRES_ENGINES:
        if database["ENGINE"] == "django.db.backends.postgresql":
            database["ENGINE"] = POSTGRESQL_ENGINE
        options = database.setdefault("OPTIONS", {})
        options.setdefault("connect_timeout", CONNECT_TIMEOUT_SECONDS)
        options.setdefault("tcp_user_timeout", TCP_USER_TIMEOUT_MS)
        for name, value in KEEPALIVE_OPTIONS.items():
            options.setdefault(name, value)
        for name, value in (postgresql_options or {}).items():
            options.setdefault(name, value)
        if pool:
            options["pool"] = dict(pool)
            database["CONN_MAX_AGE"] = 0
    return database
