"""The documents generated from the live server: docs/mcp-tools.json (its identity and
``tools/list`` as the SDK serves them) and server.json for the MCP Registry. Both are rendered
for an instance: the ones in docs/ for ``identity.DOCUMENTED``, so that they do not change with
the environment they were exported in; an operator's server.json for their own."""

import asyncio
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from mcp import Client

from mcp_endpoint import identity
from mcp_endpoint.server import create_server

TOOLS_JSON_PATH = Path(settings.BASE_DIR) / "docs" / "mcp-tools.json"
SERVER_JSON_PATH = Path(settings.BASE_DIR) / "docs" / "server.json"


def live_listing(instance: identity.Instance = identity.DOCUMENTED) -> dict[str, Any]:
    """Ask a real server object for its identity and tools, through the SDK's own client."""

    async def fetch() -> dict[str, Any]:
        async with Client(create_server(instance), mode="legacy") as client:
            listing = await client.list_tools()
            info = client.server_info
        return {
            "server": info.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "tools": [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listing.tools],
        }

    return asyncio.run(fetch())


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"
