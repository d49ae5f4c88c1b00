"""A fixed-window rate limit per client address, kept in Django's cache (the
database cache by default, so every worker process shares the counts)."""

import time

from django.core.cache import cache
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The peer address uvicorn reports (it applies X-Forwarded-For only from trusted proxies)."""
    return request.META.get("REMOTE_ADDR") or "unknown"


def allow(bucket: str, address: str, *, limit: int, window_seconds: int) -> tuple[bool, int]:
    """Count one attempt; return (allowed, seconds until the window resets)."""
    now = int(time.time())
    window = now // window_seconds
    key = f"ratelimit:{bucket}:{address}:{window}"
    # add() is atomic on every cache backend: the first attempt creates the counter.
    if cache.add(key, 1, timeout=window_seconds + 1):
        count = 1
    else:
        try:
            count = cache.incr(key)
        except ValueError:  # expired between add() and incr()
            cache.set(key, 1, timeout=window_seconds + 1)
            count = 1
    retry_after = (window + 1) * window_seconds - now
    return count <= limit, retry_after
