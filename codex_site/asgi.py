"""The ASGI application uvicorn serves: /mcp and its resource metadata go to the MCP
SDK's app, everything else to Django. ``lifespan`` goes to the SDK app, whose
session manager must run for the whole life of the process."""

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")

django_app = get_asgi_application()  # sets Django up before the MCP side imports models

import codex_metrics  # noqa: E402
from codex_site.bodies import BodyLimit  # noqa: E402
from codex_site.checks import refuse_to_serve_a_bad_configuration  # noqa: E402
from common import tracing  # noqa: E402
from common.access_log import access_logged  # noqa: E402
from mcp_endpoint.http import ENDPOINT_PATHS, MCP_PATHS, build_mcp_http_app  # noqa: E402
from mcp_endpoint.identity import VERSION  # noqa: E402

refuse_to_serve_a_bad_configuration()
# Before any request and any connection: OpenTelemetry from the OTEL_* variables, or nothing.
tracing.configure_from_environment(VERSION)

GC_YOUNGEST_THRESHOLD = 10_000


def build_application():
    """A fresh router. The SDK's session manager runs once per instance, so each
    server (uvicorn, or a test's live server) needs its own. Every request's body is
    bounded in size and time before either side sees it (``codex_site.bodies``), and
    every request is one line of the access log (``common.access_log``), refusals too, and
    each /mcp answer is counted by status (the resource metadata's are not)."""
    mcp_app = build_mcp_http_app()

    async def application(scope, receive, send) -> None:
        if scope["type"] == "websocket":
            # Nothing here speaks WebSocket (Django's handler would raise on the scope);
            # closing before accepting makes the server answer 403.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] == "lifespan" or scope.get("path") in MCP_PATHS:
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return access_logged(BodyLimit(application), codex_metrics.ResponseCounter(ENDPOINT_PATHS))


application = build_application()

# The collector, tuned for a server: everything loaded so far (Django, the SDK, the app:
# several hundred thousand objects that live as long as the process) is moved out of its
# reach, and the youngest generation is collected after 10,000 net allocations instead of
# 700: full collections of that startup heap had made the p99 of a get (docs/performance.md).
gc.freeze()
gc.set_threshold(GC_YOUNGEST_THRESHOLD, *gc.get_threshold()[1:])
