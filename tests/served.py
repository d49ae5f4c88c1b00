"""Processes the tests and scripts start on 127.0.0.1: a free port, a wait for a server's
health check, a stop that does not hang, and programs installed once under var/. Imports
nothing of Django, so scripts may use it."""

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn
from unittest import SkipTest

import httpx2

ROOT = Path(__file__).resolve().parent.parent


def missing(message: str, *, required_by: str) -> NoReturn:
    """A program the tests need is not installed: skip, or fail where the environment
    variable ``required_by`` is ``1`` (as ``.ci/run`` sets it)."""
    if os.environ.get(required_by) == "1":
        raise RuntimeError(message)
    raise SkipTest(message)


def _ephemeral_ports() -> range:
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(low, high + 1)


def free_port() -> int:
    """A port on 127.0.0.1 that is free now and that no outgoing connection will take before
    the server it is for binds it (which may be seconds later, after a migrate): picked
    below the range the system draws outgoing connections' local ports from, at random,
    where port 0 would give one from inside it."""
    ephemeral = _ephemeral_ports()
    candidates = [port for port in range(10_000, 32_768) if port not in ephemeral]
    for port in [*random.sample(candidates, min(100, len(candidates))), 0]:  # 0: a system without such ports
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port on 127.0.0.1")


def wait_until_healthy(base: str, process: subprocess.Popen, *, path: str = "/healthz", timeout: float = 60) -> None:
    """Return once ``base + path`` answers 200; raise if ``process`` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if httpx2.get(base + path, timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise RuntimeError(f"{process.args[:3]} did not answer {base + path}")
        time.sleep(0.2)


def stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """Terminate ``process`` and wait for it; kill it if it does not end in ``timeout``."""
    process.terminate()
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_serve(port: int, env: dict[str, str], *extra: str, **popen) -> subprocess.Popen:
    """``python -m codex_site.serve`` (how ``make run`` and production start) on 127.0.0.1."""
    command = [sys.executable, "-m", "codex_site.serve", "--host", "127.0.0.1", "--port", str(port), *extra]
    return subprocess.Popen(command, cwd=ROOT, env=env, **popen)


def migrate_and_mint(env: dict[str, str], username: str, lifetime_seconds: int = 3600) -> str:
    """Migrate the database ``env`` names, add ``username``, and return a token for it with
    both scopes (``mint_token``, as an operator would)."""
    manage = [sys.executable, "manage.py"]
    run = {"cwd": ROOT, "env": env, "check": True, "capture_output": True, "text": True}
    subprocess.run([*manage, "migrate", "--noinput"], **run)
    add = f"from django.contrib.auth import get_user_model; get_user_model().objects.create_user({username!r})"
    subprocess.run([*manage, "shell", "-c", add], **run)
    scopes = ["--scopes", "notes:read notes:write", "--lifetime", str(lifetime_seconds)]
    return subprocess.run([*manage, "mint_token", username, *scopes], **run).stdout.strip().splitlines()[-1]


def install_once(target: Path, install: Callable[[Path], None]) -> Path:
    """``target``, made by ``install`` (given a fresh directory) the first time it is asked for.

    The install goes to a directory of its own beside ``target`` and is renamed into place when
    whole, so that test processes running side by side never see half of one."""
    if (target / ".installed").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.partial-", dir=target.parent))
    try:
        install(partial)
        (partial / ".installed").write_text("ok\n")
        try:
            partial.rename(target)
        except OSError:  # another process put its whole install there first, or a stale one is there
            if not (target / ".installed").is_file():
                shutil.rmtree(target)
                partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target
