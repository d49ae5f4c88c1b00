"""The OCI image's entry point (``Containerfile``), installed there as the command ``codex``.

    codex [serve] [uvicorn options]   uvicorn through codex_site.serve, on 0.0.0.0:8000 (the default);
                                      on SQLite (no DATABASE_URL) the migrations first
    codex migrate                     apply the database migrations: once per release, before the servers
    codex manage COMMAND [ARGS...]    any manage.py command (mint_token, codex_adduser, codex_backup, ...)
    codex healthcheck                 GET /healthz on this container's server; exit 0 on a 200 (HEALTHCHECK)

Configuration comes from the environment only. Every sub-command but ``healthcheck`` refuses to
run, naming them, while SECRET_KEY or CODEX_PUBLIC_URL is unset: in a container the checkout's
defaults are never right (a key kept in var/ for debug runs; http://127.0.0.1:8000, to which
every token would be bound and the allowed hosts narrowed). The health check imports nothing
of Django, so that a probe every few seconds costs a short-lived interpreter and one request.
"""

import http.client
import os
import runpy
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

MANAGE_PY = Path(__file__).resolve().parent.parent / "manage.py"
PORT = 8000
REQUIRED = ("SECRET_KEY", "CODEX_PUBLIC_URL")
HEALTHCHECK_TIMEOUT_SECONDS = 4
# Where the server listens is the image's, not the command line's: the health check and the
# manifests' probes ask port 8000.
FIXED_OPTIONS = {"--host", "--port", "--uds", "--fd"}
USAGE = "usage: codex [serve [uvicorn options] | migrate | manage COMMAND [ARGS...] | healthcheck]"


def missing_settings(environ: Mapping[str, str]) -> list[str]:
    return [name for name in REQUIRED if not environ.get(name, "").strip()]


def refusal(missing: Sequence[str]) -> str:
    return (
        f"Agent Codex refuses to start: {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not set. "
        "The image needs both SECRET_KEY (a long random value, the same on every replica) and "
        "CODEX_PUBLIC_URL (the origin clients reach, like https://codex.example.com), "
        "as environment variables."
    )


def health_host(environ: Mapping[str, str]) -> str:
    """The Host header of the health check: the public host, which ALLOWED_HOSTS always
    admits when the site works at all (127.0.0.1 may be left out of it)."""
    return urlsplit(environ.get("CODEX_PUBLIC_URL", "")).netloc or "127.0.0.1"


def healthcheck(environ: Mapping[str, str], port: int = PORT) -> int:
    """0 if this container's server answers /healthz with 200 (its database answers too), else 1."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=HEALTHCHECK_TIMEOUT_SECONDS)
    try:
        connection.request("GET", "/healthz", headers={"Host": health_host(environ)})
        status = connection.getresponse().status
    except OSError as error:
        print(f"unhealthy: {error}", file=sys.stderr)
        return 1
    finally:
        connection.close()
    if status != 200:
        print(f"unhealthy: /healthz answered {status}", file=sys.stderr)
        return 1
    return 0


def on_sqlite(environ: Mapping[str, str]) -> bool:
    """Whether the database is SQLite: the default (no DATABASE_URL), or a sqlite: one."""
    url = environ.get("DATABASE_URL", "").strip().lower()
    return not url or url.startswith("sqlite")


def serve_args(extra: Sequence[str]) -> list[str]:
    """codex_site.serve's arguments: every address of the container, on the port it exposes."""
    return ["--host", "0.0.0.0", "--port", str(PORT), *extra]


def manage(args: Sequence[str]) -> None:
    """Django's command line, run as ``python manage.py ARGS`` runs it (a refusal is one line)."""
    sys.argv = [str(MANAGE_PY), *args]
    runpy.run_path(str(MANAGE_PY), run_name="__main__")


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    command = args.pop(0) if args and not args[0].startswith("-") else "serve"
    if command == "healthcheck" and not args:
        sys.exit(healthcheck(os.environ))
    if command not in {"serve", "migrate", "manage"} or (command == "migrate" and args):
        sys.exit(USAGE)
    if command == "serve" and (fixed := [arg for arg in args if arg.split("=")[0] in FIXED_OPTIONS]):
        option = fixed[0].split("=")[0]
        sys.exit(f"codex serve: {option} is the image's (0.0.0.0:{PORT}); publish the port as another instead")
    if missing := missing_settings(os.environ):
        sys.exit(refusal(missing))
    if command == "serve":
        from codex_site import serve

        # The SQLite default has one owner, this container: it migrates its own file first, so that
        # `podman run` alone serves. On PostgreSQL the servers never do (a Job does, once).
        if (
            on_sqlite(os.environ)
            and subprocess.run([sys.executable, str(MANAGE_PY), "migrate", "--noinput"]).returncode
        ):
            sys.exit(1)  # migrate has said why
        serve.main(serve_args(args))  # execs uvicorn
    elif command == "migrate":
        manage(["migrate", "--noinput"])
    elif not args:
        sys.exit(USAGE)
    else:
        manage(args)


if __name__ == "__main__":
    main()
