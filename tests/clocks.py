"""A still clock for the fixed-window rate limits (``common.ratelimit``, and the failed client
authentications' counters of ``authserver.core.attempts``).

Those limits count in windows of the wall clock (a minute, ten minutes, an hour), so a test
that makes its calls across a window's end sees the count start again. Inside
``one_rate_window()`` the limits' clock stands still, 30 s into a minute and a ten-minute
window, half an hour into an hour, so every call of the test falls in one window. Only the
limits' clock: tokens, sessions and the cache keep the real time.
"""

import time
from types import SimpleNamespace
from typing import Any
from unittest import mock

from authserver.core import attempts
from common import ratelimit


class one_rate_window:  # lower case: it reads as the function it was (`with one_rate_window():`)
    """Both limits' clocks standing still, as a context manager or started and stopped."""

    def __init__(self) -> None:
        still = time.time() // 3600 * 3600 + 1830
        self.patchers = [
            mock.patch.object(ratelimit, "time", SimpleNamespace(time=lambda: still)),
            mock.patch.object(attempts, "clock", lambda: still),
        ]

    def start(self) -> None:
        for patcher in self.patchers:
            patcher.start()

    def stop(self) -> None:
        for patcher in reversed(self.patchers):
            patcher.stop()

    def __enter__(self) -> None:
        self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


class SignInClock:
    """A clock for allauth's rate limits (the sign-in throttle), standing still until a test
    moves it on: ``advance(seconds)``. Only those limits' clock (its locks' waits keep the
    real monotonic clock)."""

    def __init__(self) -> None:
        self.now = time.time()

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def patch(self, module=None):
        """Stand in for ``module``'s ``time`` (allauth's rate limits by default; allauth's TOTP
        codes take ``allauth.mfa.totp.internal.auth``): both registered in common.internals."""
        if module is None:
            from allauth.core.internal import ratelimit as module
        return mock.patch.object(
            module, "time", SimpleNamespace(time=self.time, monotonic=time.monotonic, sleep=time.sleep)
        )
