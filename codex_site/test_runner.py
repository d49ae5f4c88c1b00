"""Django's test runner with this project's test configuration.

Settings never look at the command line; ``TEST_RUNNER`` points here and the
runner applies what tests need before any database or system check is touched:
a fast password hasher, a throwaway secret key (unless one is set), static files from
the finders (no collectstatic), no persistent
connections (a connection left open in a live server's thread would keep
PostgreSQL from dropping the test database), quiet logs, and Client ID Metadata
Documents served from loopback (the tests' own clients).
"""

import copy
import logging.config
import os
from typing import Any

from django.conf import settings
from django.db import connections
from django.test.runner import DiscoverRunner
from django.test.utils import override_settings

TEST_SECRET_KEY = "test-only-key-not-for-production-" + "x" * 32
PLAIN_STATIC_STORAGE = "django.contrib.staticfiles.storage.StaticFilesStorage"


def quiet_logging(config: dict[str, Any]) -> dict[str, Any]:
    """The project's logging, with refusals (the point of many tests) kept out of the output."""
    config = copy.deepcopy(config)
    if not os.environ.get("CODEX_LOG_LEVEL"):
        config["root"]["level"] = "WARNING"
    for name in ["django.request", "django.security"]:
        config["loggers"][name] = {"level": "ERROR"}
    return config


class CodexTestRunner(DiscoverRunner):
    def setup_test_environment(self, **kwargs) -> None:
        super().setup_test_environment(**kwargs)
        # Left enabled to the end of the run: undoing it would bring back the empty key.
        override_settings(
            PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"],
            SECRET_KEY=os.environ.get("SECRET_KEY") or TEST_SECRET_KEY,
            # The tests' clients serve their documents on loopback (codex_site.checks lets the
            # test runner, and nothing else, do so with debug off).
            CODEX_CIMD_ALLOW_LOOPBACK=True,
            CODEX_TEST_RUNNER=True,
            # Also what a later django.setup() (importing codex_site.asgi) configures.
            LOGGING=quiet_logging(settings.LOGGING),
            # Django's advice for tests: not the manifest storage, which needs collectstatic
            # first; WhiteNoise serves the same files from the finders instead
            # (tests.test_static checks the collected, hashed and compressed ones).
            STORAGES={**settings.STORAGES, "staticfiles": {"BACKEND": PLAIN_STATIC_STORAGE}},
            WHITENOISE_USE_FINDERS=True,
            STATIC_ROOT=None,  # nothing collected: WhiteNoise would warn that it is missing
        ).enable()
        logging.config.dictConfig(settings.LOGGING)
        for alias in settings.DATABASES:
            connections.settings[alias]["CONN_MAX_AGE"] = 0
