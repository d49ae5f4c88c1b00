"""The one sync/async boundary between the async MCP handlers and the sync ORM."""

from collections.abc import Callable
from typing import TypeVar

from asgiref.sync import sync_to_async
from django.db import close_old_connections

T = TypeVar("T")


async def run_sync(work: Callable[[], T]) -> T:
    """The one sync/async boundary: ORM work runs in a worker thread (not one shared
    thread), with connections opened and closed around it as Django's own ASGI
    handler does around a request."""

    def call() -> T:
        close_old_connections()
        try:
            return work()
        finally:
            close_old_connections()

    return await sync_to_async(call, thread_sensitive=False)()
