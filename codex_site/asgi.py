"""The ASGI application uvicorn serves: /mcp and its resource metadata go to the MCP
SDK's app, everything else to Django. ``lifespan`` goes to the SDK app, whose
session manager must run for the whole life of the process."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "codex_site.settings")

django_app = get_asgi_application()  # sets Django up before the MCP side imports models

from codex_site.checks import refuse_to_serve_a_bad_configuration  # noqa: E402
from mcp_endpoint.http import MCP_PATHS, build_mcp_http_app  # noqa: E402

refuse_to_serve_a_bad_configuration()


def build_application():
    """A fresh router. The SDK's session manager runs once per instance, so each
    server (uvicorn, or a test's live server) needs its own."""
    mcp_app = build_mcp_http_app()

    async def application(scope, receive, send) -> None:
        if scope["type"] == "lifespan" or scope.get("path") in MCP_PATHS:
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return application


application = build_application()
