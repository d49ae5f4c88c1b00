"""Start uvicorn with this project's production settings, read from the environment.

    python -m codex_site.serve --host 127.0.0.1 --port 8000 [more uvicorn options]

Used by ``make run`` and the systemd units in ``deploy/``. What it adds to a bare
``uvicorn codex_site.asgi:application``:

- Proxy headers (``X-Forwarded-For``/``-Proto``) are trusted only from the addresses in
  ``CODEX_TRUSTED_PROXIES`` (comma-separated; uvicorn's ``--forwarded-allow-ips``).
  Unset, they are ignored (``--no-proxy-headers``): uvicorn's own default trusts
  127.0.0.1, which would let any local process, or a proxy that forwards the client's
  header unchanged, choose the address that rate limits key on. On a Unix socket (``--uds``),
  whose peer has no address, ``*`` is required: uvicorn applies proxy headers from such a peer
  only when it trusts every one. Django reads the scheme
  uvicorn decided (the ASGI scope's; no ``SECURE_PROXY_SSL_HEADER``), so this list alone
  says whether a request came over HTTPS.
- ``--limit-concurrency`` (``CODEX_LIMIT_CONCURRENCY``, default: half the open-files
  limit, at most 1,000): past it, new requests get 503 at once instead of queueing
  until the process runs out of file descriptors.
- ``--timeout-keep-alive`` (``CODEX_KEEPALIVE_SECONDS``, default 5) and a graceful
  shutdown timeout.
- The h11 protocol, whatever else is installed, with its bound on a request's headers
  (``--h11-max-incomplete-event-size``: a request whose headers pass it is refused), and
  no WebSocket (nothing here speaks it; ``wsproto`` is installed for the test browser).
- With several workers (``--workers N``, or uvicorn's ``WEB_CONCURRENCY``), metrics in
  prometheus_client's multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR`` (default
  ``<CODEX_VAR_DIR>/prometheus``) is cleaned of the last run's files here, in the process that
  starts the workers, before any of them runs, so that one scrape adds up every worker's
  counts (``codex_metrics``). An operator who sets the variable gets the same with one worker.

Request bodies are bounded by the application itself (``codex_site.bodies``: size, and
the time the body may take to arrive). uvicorn has no timeout for a request's headers: a
client that never finishes them holds its connection until it closes it. In production a
reverse proxy (nginx, ``deploy/nginx/``, ``client_header_timeout``) reads whole requests
before they reach uvicorn.
"""

import os
import resource
import sys
from collections.abc import Mapping, Sequence

from codex_metrics.exposition import MULTIPROC_ENV, clean_multiprocess_dir

APP = "codex_site.asgi:application"
# uvicorn's default, named here because it is the only bound on a request's headers.
MAX_HEADER_BYTES = 16 * 1024


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    value = environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = int(value)
    except ValueError:
        raise SystemExit(f"Agent Codex refuses to start: {name} must be an integer, not {value!r}") from None
    if number < 1:
        raise SystemExit(f"Agent Codex refuses to start: {name} must be at least 1, not {number}")
    return number


def default_concurrency_limit() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1_000
    return max(16, min(1_000, soft // 2))


def uvicorn_args(environ: Mapping[str, str], extra: Sequence[str] = ()) -> list[str]:
    """uvicorn's command-line arguments (after the program name) for this environment."""
    args = [APP]
    proxies = [item.strip() for item in environ.get("CODEX_TRUSTED_PROXIES", "").split(",") if item.strip()]
    if any(argument == "--uds" or argument.startswith("--uds=") for argument in extra) and proxies != ["*"]:
        # A Unix socket's peer has no address, and uvicorn applies proxy headers from such a peer
        # only when it trusts every one: without that, every client would be one, "unknown", to
        # every limit (common.ratelimit).
        raise SystemExit(
            "Agent Codex refuses to start: on a Unix socket (--uds) set CODEX_TRUSTED_PROXIES=* "
            "(only the proxy in front can connect to it, and it names the client in X-Forwarded-For)"
        )
    if proxies:
        args += ["--proxy-headers", "--forwarded-allow-ips", ",".join(proxies)]
    else:
        args += ["--no-proxy-headers"]
    args += ["--limit-concurrency", str(_int(environ, "CODEX_LIMIT_CONCURRENCY", default_concurrency_limit()))]
    args += ["--timeout-keep-alive", str(_int(environ, "CODEX_KEEPALIVE_SECONDS", 5))]
    args += ["--timeout-graceful-shutdown", "10", "--no-server-header"]
    args += ["--http", "h11", "--h11-max-incomplete-event-size", str(MAX_HEADER_BYTES), "--ws", "none"]
    return args + list(extra)


def worker_count(environ: Mapping[str, str], extra: Sequence[str]) -> int:
    """How many worker processes uvicorn will start: ``--workers N`` (or ``--workers=N``),
    else ``WEB_CONCURRENCY``, else one."""
    value = environ.get("WEB_CONCURRENCY", "1")
    for index, argument in enumerate(extra):
        if argument == "--workers" and index + 1 < len(extra):
            value = extra[index + 1]
        elif argument.startswith("--workers="):
            value = argument.partition("=")[2]
    try:
        return max(1, int(value))
    except ValueError:
        return 1  # uvicorn refuses it with its own message


def metrics_dir(environ: Mapping[str, str], extra: Sequence[str]) -> str | None:
    """Where the workers keep their metric values (prometheus_client's multiprocess mode),
    or None for one process that keeps them in memory."""
    if environ.get(MULTIPROC_ENV):
        return environ[MULTIPROC_ENV]
    if worker_count(environ, extra) > 1:
        from codex_site.settings import VAR_DIR  # settings only read the environment

        return str(VAR_DIR / "prometheus")
    return None


def main(argv: Sequence[str] | None = None) -> None:
    extra = list(sys.argv[1:] if argv is None else argv)
    args = uvicorn_args(os.environ, extra)
    if directory := metrics_dir(os.environ, extra):
        # Before any worker starts: the last run's values must not be added to this run's.
        clean_multiprocess_dir(directory)
        os.environ[MULTIPROC_ENV] = directory
    # exec, so that uvicorn is the process a supervisor signals.
    os.execv(sys.executable, [sys.executable, "-m", "uvicorn", *args])


if __name__ == "__main__":
    main()
