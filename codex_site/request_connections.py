"""Django's own requests close their database connections when they finish.

Under ASGI, Django runs each request's synchronous code (views, middleware, the
``request_finished`` signal) in a thread of its own, made for that request by asgiref's
``ThreadSensitiveContext`` and gone after it. A connection kept open for ``CONN_MAX_AGE``
in that thread can never serve another request: it stays open, idle, until the garbage
collector reaches the dead thread's objects, which the server tunes to run rarely
(``codex_site.asgi``). A load balancer polling ``/healthz`` thus held dozens of idle
PostgreSQL connections per worker, and after a failover they filled the new primary's
``max_connections``. (Django's documentation says as much: persistent connections do not
suit ASGI.) The MCP tool calls run in the event loop's long-lived executor threads
(``mcp_endpoint.boundary``), where ``CONN_MAX_AGE`` does reuse connections; they never
pass through Django's request cycle, so they keep theirs.
"""

from typing import Any

from django.core.handlers.asgi import ASGIHandler
from django.db import connections


def close_request_connections(sender: Any, **kwargs: Any) -> None:
    """``request_finished`` receiver: runs in the finishing request's thread, so it closes
    that request's connections and no other thread's.

    Only for requests served by the ASGI handler: Django's test client (its own handlers)
    runs a request in the test's thread, whose connection holds the test's transaction, and
    Django keeps that open on purpose."""
    if not (isinstance(sender, type) and issubclass(sender, ASGIHandler)):
        return
    for connection in connections.all(initialized_only=True):
        connection.close()
