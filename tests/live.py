"""A real uvicorn server on 127.0.0.1 with an ephemeral port, in a thread of the test process
(so it shares the test database), and helpers to talk to it."""

import datetime as dt
import socket
import threading
import time
from typing import Any

import uvicorn
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import caches
from django.test import TransactionTestCase, override_settings

from authserver.core.tokens import mint_access_token
from codex_site.asgi import build_application
from codex_site.settings import public_url_settings

BOTH_SCOPES = ("notes:read", "notes:write")


class ThreadedServer:
    """uvicorn serving ``app`` on 127.0.0.1 and an ephemeral port, in a thread of this process."""

    def __init__(self, app: Any = None, *, lifespan: str = "on") -> None:
        self.app = app
        self.lifespan = lifespan
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        config = uvicorn.Config(self.app, lifespan=self.lifespan, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=20)
        self.socket.close()


class LiveServer(ThreadedServer):
    """The real application (the test process's database), served by a real uvicorn."""

    def start(self) -> None:
        self.app = build_application()
        super().start()


class LiveServerTestCase(TransactionTestCase):
    """Starts one uvicorn per test class; the public URL (and so the MCP resource) is its address."""

    live: LiveServer
    server_class: type[LiveServer] = LiveServer  # a subclass may wrap the application
    _settings_override: Any

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        # Rate-limit counters (the default cache) and refused documents' notes (the notes cache,
        # which also keeps them from being fetched again) of earlier classes.
        for alias in settings.CACHES:
            caches[alias].clear()
        cls.live = cls.server_class()
        base = cls.live.base_url
        cls._settings_override = override_settings(
            **public_url_settings(base),
            # Every test registers clients from 127.0.0.1; only the rate-limit tests lower these.
            CODEX_DCR_RATE_LIMIT=10_000,
            CODEX_CIMD_RATE_LIMIT=10_000,
            CODEX_TOOL_CALLS_PER_MINUTE=1_000_000,
        )
        cls._settings_override.enable()
        cls.live.start()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.live.stop()
        cls._settings_override.disable()
        super().tearDownClass()

    @property
    def mcp_url(self) -> str:
        return self.live.base_url + "/mcp"

    def make_user(self, username: str, **extra: Any):
        return get_user_model().objects.create_user(username, password=f"{username}-password", **extra)

    def token_for(self, user, scopes=BOTH_SCOPES, lifetime=dt.timedelta(hours=1)) -> str:
        return mint_access_token(user=user, scopes=scopes, lifetime=lifetime)
