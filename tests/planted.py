"""Unique strings planted in notes and requests, for tests that grep what the server emits
(log lines, spans) for anything it must never carry."""

import secrets
from typing import Any

from tests.mcp_client import error_of, success_of

MISSING_ID = "00000000-0000-4000-8000-000000000000"


def planted_strings(*names: str) -> dict[str, str]:
    """Note fields and a query, plus ``names``, each unique to this call."""
    mark = secrets.token_hex(6)
    strings = {
        "content": f"content-{mark} the launch codes",
        "title": f"title-{mark}",
        "tag": f"tag-{mark}",
        "agent": f"agent-{mark}",
        "new content": f"rewritten-{mark}",
        "query": f"query-{mark}",
        "request id": f"request-{mark}",
    }
    strings.update({name: f"{name.replace(' ', '-')}-{mark}" for name in names})
    return strings


def planted_entry(planted: dict[str, str]) -> dict[str, Any]:
    return {
        "content": planted["content"],
        "title": planted["title"],
        "tags": [planted["tag"]],
        "relatedAgentIds": [planted["agent"]],
    }


async def every_tool(client, planted: dict[str, str]) -> None:
    """Through an SDK client: save, get, search by query and by tag, update, and two
    failures (a stale revision: conflict; an unknown id: not_found)."""
    entry = planted_entry(planted)
    arguments = {"requestId": planted["request id"], "entry": entry}
    saved = success_of(await client.call_tool("field_notes_save", arguments))
    entry_id = saved["entry"]["id"]
    success_of(await client.call_tool("field_notes_get", {"id": entry_id}))
    success_of(await client.call_tool("field_notes_search", {"query": planted["query"]}))
    success_of(await client.call_tool("field_notes_search", {"tag": planted["tag"]}))
    update = {"id": entry_id, "expectedRevision": 1, "entry": {**entry, "content": planted["new content"]}}
    success_of(await client.call_tool("field_notes_update", update))
    assert error_of(await client.call_tool("field_notes_update", update))["code"] == "conflict"
    assert error_of(await client.call_tool("field_notes_get", {"id": MISSING_ID}))["code"] == "not_found"
