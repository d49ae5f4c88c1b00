"""The server as an operator runs it: ``python -m codex_site.serve`` in a process of its own,
with its configuration from the environment, on a socket the test bound (so its public URL,
and the resource that tokens are bound to, is known before it starts)."""

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO
from urllib.parse import quote

from django.conf import settings
from django.db import connection

from tests.served import stop, wait_until_healthy

ROOT = Path(__file__).resolve().parent.parent
START_SECONDS = 60
# For people who sign in to a server process: a hasher its default settings know (the test
# runner's fast one they do not).
SERVER_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]


def database_environment(name: str | None = None) -> dict[str, str]:
    """DATABASE_URL or CODEX_SQLITE_PATH for the test database (or, on PostgreSQL, another
    database ``name`` of the same cluster), for a process of its own."""
    config = connection.settings_dict
    if connection.vendor == "sqlite":
        return {"CODEX_SQLITE_PATH": str(name or config["NAME"])}
    user = quote(config["USER"] or "", safe="")
    password = (":" + quote(config["PASSWORD"], safe="")) if config.get("PASSWORD") else ""
    host = f"{config['HOST'] or '127.0.0.1'}:{config['PORT'] or 5432}"
    return {"DATABASE_URL": f"postgres://{user}{password}@{host}/{name or config['NAME']}"}


_collected: Path | None = None


def collected_static(environ: dict[str, str]) -> Path:
    """The static files ``collectstatic`` makes, as an operator runs it before starting the
    server (``make run`` does): made once per test run, shared by every server process."""
    global _collected
    if _collected is None:
        var_dir = Path(tempfile.mkdtemp(prefix="codex-collected-"))
        subprocess.run(
            [sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"],
            cwd=ROOT,
            env={**environ, "CODEX_VAR_DIR": str(var_dir)},
            check=True,
            capture_output=True,
            timeout=300,
        )
        _collected = var_dir / "static"
    return _collected


def server_environment(base_url: str, var_dir: Path, extra: dict[str, str]) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("CODEX_", "OTEL_"))}
    environ.pop("DATABASE_URL", None)
    environ.update(
        SECRET_KEY=settings.SECRET_KEY,
        DJANGO_DEBUG="0",
        CODEX_PUBLIC_URL=base_url,
        CODEX_VAR_DIR=str(var_dir),
        CODEX_CONN_MAX_AGE="0",  # nothing held open when the test drops its database
        PYTHONUNBUFFERED="1",
    )
    environ.update(extra)
    return environ


class ServerProcess:
    """``codex_site.serve`` on 127.0.0.1 and a free port; stderr and stdout to ``output``."""

    def __init__(self, var_dir: Path, environ: dict[str, str], output: IO[bytes] | None = None) -> None:
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.var_dir = var_dir
        self.extra = environ
        self.output = output
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        environ = server_environment(self.base_url, self.var_dir, self.extra)
        static = self.var_dir / "static"
        if not static.exists():
            static.symlink_to(collected_static(environ), target_is_directory=True)
        descriptor = self.socket.fileno()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "codex_site.serve", "--fd", str(descriptor)],
            cwd=ROOT,
            env=environ,
            pass_fds=(descriptor,),
            stdout=self.output if self.output is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT if self.output is not None else subprocess.DEVNULL,
        )
        self.socket.close()  # the server has its own copy
        try:
            wait_until_healthy(self.base_url, self.process, timeout=START_SECONDS)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process is None:
            return
        stop(self.process)
        self.process = None
