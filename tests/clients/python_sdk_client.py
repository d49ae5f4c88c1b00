"""A client on a 1.x Python MCP SDK (1.9, protocol 2025-03-26; 1.30, 2025-11-25), run in that
SDK's own virtual environment by tests/test_real_clients.py: it connects over Streamable HTTP with a
bearer token, lists the tools and calls all four, and prints what it saw as one JSON line.

    python python_sdk_client.py URL TOKEN
"""

import asyncio
import json
import sys
from importlib.metadata import version

from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


def payload(result) -> dict:
    """The call's JSON text block (the one thing 2025-03-26 results carry)."""
    if result.isError:
        raise SystemExit(f"tool error: {result.content}")
    return json.loads(result.content[0].text)


async def main(url: str, token: str) -> dict:
    async with streamablehttp_client(url, headers={"Authorization": f"Bearer {token}"}) as (read, write, _):
        async with ClientSession(read, write) as session:
            initialized = await session.initialize()
            tools = await session.list_tools()
            entry = {"content": f"Saved by the Python SDK {version('mcp')}", "tags": ["python"]}
            saved = payload(
                await session.call_tool(
                    "field_notes_save", {"requestId": f"python-sdk-{version('mcp')}", "entry": entry}
                )
            )["entry"]
            got = payload(await session.call_tool("field_notes_get", {"id": saved["id"]}))["entry"]
            found = payload(await session.call_tool("field_notes_search", {"tag": "python"}))["entries"]
            updated = payload(
                await session.call_tool(
                    "field_notes_update",
                    {
                        "id": saved["id"],
                        "expectedRevision": 1,
                        "entry": {"content": f"Updated by the Python SDK {version('mcp')}"},
                    },
                )
            )["entry"]
    return {
        "protocolVersion": initialized.protocolVersion,
        "server": initialized.serverInfo.name,
        "tools": [tool.name for tool in tools.tools],
        "outputSchemas": [tool.name for tool in tools.tools if getattr(tool, "outputSchema", None)],
        "saved": saved["id"],
        "got": got["content"],
        "found": [entry["id"] for entry in found],
        "updated": [updated["revision"], updated["content"]],
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
