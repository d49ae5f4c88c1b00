"""Thin adapters from validated tool arguments to notebook services.

Each adapter is synchronous and runs inside the one sync boundary of
``mcp_endpoint.server``; it turns arguments into notebook inputs and the
notebook's answer into the tool's result object.
"""

from collections.abc import Callable
from typing import Any

from notebook import selectors, services
from notebook.models import Codex
from notebook.representations import entry_dict, search_page_dict
from notebook.validation import (
    parse_entry_id,
    parse_entry_input,
    parse_expected_revision,
    parse_request_id,
    parse_search_params,
)

ToolAdapter = Callable[[Codex, dict[str, Any]], dict[str, Any]]


def save(codex: Codex, arguments: dict[str, Any]) -> dict[str, Any]:
    request_id = parse_request_id(arguments["requestId"])
    data = parse_entry_input(arguments["entry"])
    return {"entry": entry_dict(services.entry_save(codex=codex, request_id=request_id, data=data))}


def get(codex: Codex, arguments: dict[str, Any]) -> dict[str, Any]:
    entry_id = parse_entry_id(arguments["id"])
    return {"entry": entry_dict(selectors.entry_get(codex=codex, entry_id=entry_id))}


def search(codex: Codex, arguments: dict[str, Any]) -> dict[str, Any]:
    params = parse_search_params(
        query=arguments.get("query"),
        tag=arguments.get("tag"),
        related_agent_id=arguments.get("relatedAgentId"),
        limit=arguments.get("limit"),
        cursor=arguments.get("cursor"),
    )
    return search_page_dict(selectors.entry_search(codex=codex, params=params))


def update(codex: Codex, arguments: dict[str, Any]) -> dict[str, Any]:
    entry_id = parse_entry_id(arguments["id"])
    expected = parse_expected_revision(arguments["expectedRevision"])
    data = parse_entry_input(arguments["entry"])
    entry = services.entry_update(codex=codex, entry_id=entry_id, expected_revision=expected, data=data)
    return {"entry": entry_dict(entry)}


ADAPTERS: dict[str, ToolAdapter] = {
    "field_notes_save": save,
    "field_notes_get": get,
    "field_notes_search": search,
    "field_notes_update": update,
}
