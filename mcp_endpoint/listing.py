"""The live ``tools/list`` as the SDK serves it, for docs/mcp-tools.json and its test."""

import asyncio
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from mcp import Client

from mcp_endpoint.server import create_server

TOOLS_JSON_PATH = Path(settings.BASE_DIR) / "docs" / "mcp-tools.json"


def live_listing() -> dict[str, Any]:
    """Ask a real server object for its identity and tools, through the SDK's own client."""

    async def fetch() -> dict[str, Any]:
        async with Client(create_server(), mode="legacy") as client:
            listing = await client.list_tools()
            info = client.server_info
        return {
            "server": info.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "tools": [tool.model_dump(by_alias=True, exclude_none=True, mode="json") for tool in listing.tools],
        }

    return asyncio.run(fetch())


def render(listing: dict[str, Any]) -> str:
    return json.dumps(listing, indent=2, ensure_ascii=False) + "\n"
