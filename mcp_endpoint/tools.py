"""The four tools, one record each, and their thin adapters.

A ``Tool`` record holds everything about a tool: name, title, description,
schemas, annotations, the scopes it needs and its adapter. ``tools/list``, the
argument validators, the HTTP scope check, the per-call scope re-check,
``docs/mcp-tools.json`` and the "Needs notes:read" sentence are all derived
from ``TOOLS``; nothing else names a tool.

Each adapter is synchronous and runs inside the one sync boundary
(``mcp_endpoint.boundary``); it turns arguments into notebook inputs and the
notebook's answer into the tool's result object. A tool may name a read for the token
check's statement to make ahead of it (``read_ahead``, get's entry: one round trip for the
check and the read); its adapter is then given what was read.
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_endpoint.auth import ALL_SCOPES, READ, WRITE
from mcp_endpoint.schemas import (
    ENTRY_RESULT,
    GET_INPUT,
    SAVE_INPUT,
    SEARCH_INPUT,
    SEARCH_RESULT,
    UPDATE_INPUT,
)
from notebook import selectors, services
from notebook.exceptions import InvalidArgument
from notebook.limits import CANDIDATES_PER_PAGE, thousands
from notebook.models import Codex
from notebook.representations import entry_dict, search_page_dict
from notebook.validation import (
    parse_entry_id,
    parse_entry_input,
    parse_expected_revision,
    parse_request_id,
    parse_search_params,
)
from notebook.writers import Writer

# (the caller's codex, the tool's arguments, who the call writes as, what the token check
# read ahead for it or None) -> the result object.
ToolAdapter = Callable[[Codex, dict[str, Any], Writer, Any], dict[str, Any]]
# The tool's arguments -> a read ahead for the token check (``authserver.core.token_check.ReadAhead``),
# or None: no read ahead for these arguments (the adapter judges them as ever).
ReadAheadOf = Callable[[dict[str, Any]], Any]


SAVE_TITLE = "Save a field note"
SAVE_TEXT = (
    "Save a new note in the person's codex and return it at revision 1. requestId is your "
    "deduplication key within this codex: if the call fails or times out, retry with exactly "
    "the same requestId and entry and you get the same entry back (in its current state) "
    "instead of a duplicate. Reusing a requestId with a different entry is a conflict."
)


def save(codex: Codex, arguments: dict[str, Any], writer: Writer, ahead: None) -> dict[str, Any]:
    request_id = parse_request_id(arguments["requestId"])
    data = parse_entry_input(arguments["entry"])
    entry = services.entry_save(codex=codex, request_id=request_id, data=data, writer=writer)
    return {"entry": entry_dict(entry)}


GET_TITLE = "Get a field note"
GET_TEXT = (
    "Return one note with its full content, by the id that save or search returned. "
    "An id that is not in this codex is not_found."
)


def get_read_ahead(arguments: dict[str, Any]) -> selectors.EntryReadAhead | None:
    try:
        entry_id = parse_entry_id(arguments.get("id"))
    except InvalidArgument:
        return None  # judged by the adapter, once the token is
    return selectors.entry_read_ahead(entry_id)


def get(
    codex: Codex, arguments: dict[str, Any], writer: Writer, ahead: selectors.EntryReadAhead | None
) -> dict[str, Any]:
    # A read ahead holds the id it parsed from these arguments.
    entry_id = ahead.entry_id if ahead is not None else parse_entry_id(arguments["id"])
    return {"entry": entry_dict(selectors.entry_get(codex=codex, entry_id=entry_id, ahead=ahead))}


SEARCH_TITLE = "Search field notes"
SEARCH_TEXT = (
    "List notes in ascending id order (not by recency or relevance), as summaries without full "
    "content. With no arguments it browses. query is a case-insensitive literal substring "
    "(NFKC-normalized) of the title, the content or one tag; tag and relatedAgentId are exact "
    f"filters; all filters combine with AND. A filtered page examines at most "
    f"{thousands(CANDIDATES_PER_PAGE)} notes, so a page can be empty and still have a nextCursor: "
    "keep following nextCursor with the same filters until coverage.hasMore is false before "
    "concluding nothing matches."
)


def search(codex: Codex, arguments: dict[str, Any], writer: Writer, ahead: None) -> dict[str, Any]:
    params = parse_search_params(
        query=arguments.get("query"),
        tag=arguments.get("tag"),
        related_agent_id=arguments.get("relatedAgentId"),
        limit=arguments.get("limit"),
        cursor=arguments.get("cursor"),
    )
    return search_page_dict(selectors.entry_search(codex=codex, params=params))


UPDATE_TITLE = "Replace a field note"
UPDATE_TEXT = (
    "Replace a note completely and return it with its revision one higher. This is not a patch: "
    "optional fields you omit are removed. expectedRevision must be the note's current revision; "
    "otherwise the result is a conflict. On conflict, get the latest note, reconcile, and send a "
    "new complete replacement; never blindly retry with a higher revision."
)


def update(codex: Codex, arguments: dict[str, Any], writer: Writer, ahead: None) -> dict[str, Any]:
    entry_id = parse_entry_id(arguments["id"])
    expected = parse_expected_revision(arguments["expectedRevision"])
    data = parse_entry_input(arguments["entry"])
    entry = services.entry_update(
        codex=codex,
        entry_id=entry_id,
        expected_revision=expected,
        data=data,
        writer=writer,
    )
    return {"entry": entry_dict(entry)}


@dataclass(frozen=True)
class Tool:
    """One tool, every face of it."""

    name: str
    title: str
    summary: str  # the description without the "Needs ..." sentence, which is derived from scopes
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    annotations: dict[str, bool]
    scopes: frozenset[str]
    adapter: ToolAdapter
    read_ahead: ReadAheadOf | None = None

    @property
    def description(self) -> str:
        needed = [scope for scope in ALL_SCOPES if scope in self.scopes]
        return f"{self.summary} Needs {' and '.join(needed)}."

    def listing(self) -> dict[str, Any]:
        """The tool as ``tools/list`` serves it (and docs/mcp-tools.json records it)."""
        return {
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        }


# Contract 5's table: which scopes each tool needs, and its annotations.
_READS = frozenset({READ})
_WRITES = frozenset({READ, WRITE})
_SAVING = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}
_READING = {"readOnlyHint": True, "idempotentHint": True}
_REPLACING = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False}

# One row per tool, in tools/list order: name, title, summary (the description without
# its "Needs" sentence), input and output schema, annotations, scopes, adapter (and read
# ahead). Each tool's words stand beside its adapter above.
TOOLS: tuple[Tool, ...] = (
    Tool("field_notes_save", SAVE_TITLE, SAVE_TEXT, SAVE_INPUT, ENTRY_RESULT, _SAVING, _WRITES, save),
    Tool("field_notes_get", GET_TITLE, GET_TEXT, GET_INPUT, ENTRY_RESULT, _READING, _READS, get, get_read_ahead),
    Tool("field_notes_search", SEARCH_TITLE, SEARCH_TEXT, SEARCH_INPUT, SEARCH_RESULT, _READING, _READS, search),
    Tool("field_notes_update", UPDATE_TITLE, UPDATE_TEXT, UPDATE_INPUT, ENTRY_RESULT, _REPLACING, _WRITES, update),
)

TOOLS_BY_NAME: dict[str, Tool] = {tool.name: tool for tool in TOOLS}

# A tools/call naming no tool still needs a token that may read: learning which tools
# exist is reading. The server then answers it with JSON-RPC -32602 "Unknown tool".
UNKNOWN_TOOL_SCOPES = frozenset({READ})


def scopes_for(name: str) -> frozenset[str]:
    """The scopes a tools/call of ``name`` needs: checked at HTTP level and again before the service."""
    tool = TOOLS_BY_NAME.get(name)
    return tool.scopes if tool is not None else UNKNOWN_TOOL_SCOPES
