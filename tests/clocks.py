"""A still clock for the fixed-window rate limits (``authserver.ratelimit``).

Those limits count in windows of the wall clock (a minute, ten minutes, an hour), so a test
that makes its calls across a window's end sees the count start again. Inside
``one_rate_window()`` the limits' clock stands still, 30 s into a minute and a ten-minute
window, half an hour into an hour, so every call of the test falls in one window. Only the
limits' clock: tokens, sessions and the cache keep the real time.
"""

import time
from types import SimpleNamespace
from unittest import mock

from authserver import ratelimit


def one_rate_window():
    still = time.time() // 3600 * 3600 + 1830
    return mock.patch.object(ratelimit, "time", SimpleNamespace(time=lambda: still))
