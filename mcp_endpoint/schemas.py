"""The four tools, written once as data.

These dictionaries are what ``tools/list`` serves, what ``tools/call`` arguments are
validated against (with jsonschema), and what ``docs/mcp-tools.json`` is exported
from. Each ``inputSchema`` and ``outputSchema`` is its own JSON Schema root: shared
parts are copied into each root's ``definitions`` and referenced locally.

Rules a JSON Schema cannot state exactly (UTF-8 byte limits, control characters,
duplicates, provenance depth and size) are checked by ``notebook.validation`` and
answered with ``invalid_argument``; the schemas carry the character limits.
"""

import copy
from typing import Any

from notebook.models import (
    CONTENT_MAX_BYTES,
    RELATED_AGENT_MAX_CHARS,
    RELATED_AGENTS_MAX_ITEMS,
    REQUEST_ID_MAX_CHARS,
    TAG_MAX_CHARS,
    TAGS_MAX_ITEMS,
    TITLE_MAX_CHARS,
)
from notebook.validation import (
    CURSOR_MAX_CHARS,
    MAX_SAFE_INTEGER,
    QUERY_MAX_CHARS,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
)

DIALECT = "http://json-schema.org/draft-07/schema#"
ENTRY_ID_REGEX = "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
TIMESTAMP_REGEX = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$"

READ = "notes:read"
WRITE = "notes:write"

# JSON Schema patterns are ECMA-262 regular expressions, where "$" matches only at the very
# end; Python's re (which jsonschema uses) also lets "$" match before a final newline. The
# fixed lengths close that gap for every validator, and clients see them in the schema.
_ENTRY_ID = {
    "type": "string",
    "minLength": 36,
    "maxLength": 36,
    "pattern": ENTRY_ID_REGEX,
    "description": "Lowercase UUIDv4 of an entry.",
}

_ENTRY_INPUT: dict[str, Any] = {
    "type": "object",
    "description": "A complete entry. Omitted optional fields are absent (never null).",
    "additionalProperties": False,
    "required": ["content"],
    "properties": {
        "content": {
            "type": "string",
            "minLength": 1,
            "maxLength": CONTENT_MAX_BYTES,
            "description": "The note, 1 to 65,536 bytes as UTF-8, no U+0000. Stored exactly as given.",
        },
        "title": {
            "type": "string",
            "minLength": 1,
            "maxLength": TITLE_MAX_CHARS,
            "description": "Optional short title, 1 to 200 characters, no control characters.",
        },
        "tags": {
            "type": "array",
            "maxItems": TAGS_MAX_ITEMS,
            "items": {"type": "string", "minLength": 1, "maxLength": TAG_MAX_CHARS},
            "description": "Up to 32 distinct tags of 1 to 64 characters, no control characters; order kept.",
        },
        "relatedAgentIds": {
            "type": "array",
            "maxItems": RELATED_AGENTS_MAX_ITEMS,
            "items": {"type": "string", "minLength": 1, "maxLength": RELATED_AGENT_MAX_CHARS},
            "description": "Up to 32 distinct identifiers (1 to 512 characters) of agents this note concerns.",
        },
        "provenance": {
            "type": "object",
            "description": (
                "Where the note came from: any JSON object, nested at most 8 levels deep, "
                "at most 8,192 bytes as compact UTF-8 JSON, no U+0000 in any string."
            ),
        },
    },
}

_TIMESTAMP = {
    "type": "string",
    "minLength": 24,
    "maxLength": 24,
    "pattern": TIMESTAMP_REGEX,
    "description": "RFC 3339 UTC, millisecond precision.",
}
_STRINGS = {"type": "array", "items": {"type": "string"}}

_ENTRY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "revision", "content", "tags", "relatedAgentIds", "createdAt", "updatedAt"],
    "properties": {
        "id": {"$ref": "#/definitions/EntryId"},
        "revision": {"type": "integer", "minimum": 1},
        "title": {"type": "string"},
        "content": {"type": "string"},
        "tags": _STRINGS,
        "relatedAgentIds": _STRINGS,
        "provenance": {"type": "object"},
        "createdAt": {"$ref": "#/definitions/Timestamp"},
        "updatedAt": {"$ref": "#/definitions/Timestamp"},
    },
}

_ENTRY_SUMMARY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["id", "revision", "tags", "relatedAgentIds", "createdAt", "updatedAt", "excerpt", "contentBytes"],
    "properties": {
        "id": {"$ref": "#/definitions/EntryId"},
        "revision": {"type": "integer", "minimum": 1},
        "title": {"type": "string"},
        "tags": _STRINGS,
        "relatedAgentIds": _STRINGS,
        "createdAt": {"$ref": "#/definitions/Timestamp"},
        "updatedAt": {"$ref": "#/definitions/Timestamp"},
        "excerpt": {"type": "string", "description": "The first (at most) 160 characters of the content."},
        "contentBytes": {"type": "integer", "minimum": 1, "description": "UTF-8 byte length of the content."},
    },
}


def _root(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    """A standalone schema root with its own copy of the definitions it uses."""
    root = {"$schema": DIALECT, **copy.deepcopy(schema)}
    if definitions:
        root["definitions"] = copy.deepcopy(definitions)
    return root


def _entry_result() -> dict[str, Any]:
    return _root(
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["entry"],
            "properties": {"entry": {"$ref": "#/definitions/Entry"}},
        },
        {"Entry": _ENTRY, "EntryId": _ENTRY_ID, "Timestamp": _TIMESTAMP},
    )


TOOLS: list[dict[str, Any]] = [
    {
        "name": "field_notes_save",
        "title": "Save a field note",
        "description": (
            "Save a new note in the person's codex and return it at revision 1. requestId is your "
            "deduplication key within this codex: if the call fails or times out, retry with exactly "
            "the same requestId and entry and you get the same entry back (in its current state) "
            "instead of a duplicate. Reusing a requestId with a different entry is a conflict. "
            "Needs notes:read and notes:write."
        ),
        "inputSchema": _root(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["requestId", "entry"],
                "properties": {
                    "requestId": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": REQUEST_ID_MAX_CHARS,
                        "description": "Your unique id for this save (1 to 128 characters, no control characters).",
                    },
                    "entry": {"$ref": "#/definitions/EntryInput"},
                },
            },
            {"EntryInput": _ENTRY_INPUT},
        ),
        "outputSchema": _entry_result(),
        "annotations": {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True},
    },
    {
        "name": "field_notes_get",
        "title": "Get a field note",
        "description": (
            "Return one note with its full content, by the id that save or search returned. "
            "An id that is not in this codex is not_found. Needs notes:read."
        ),
        "inputSchema": _root(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["id"],
                "properties": {"id": {"$ref": "#/definitions/EntryId"}},
            },
            {"EntryId": _ENTRY_ID},
        ),
        "outputSchema": _entry_result(),
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    },
    {
        "name": "field_notes_search",
        "title": "Search field notes",
        "description": (
            "List notes in ascending id order (not by recency or relevance), as summaries without full "
            "content. With no arguments it browses. query is a case-insensitive literal substring "
            "(NFKC-normalized) of the title, the content or one tag; tag and relatedAgentId are exact "
            "filters; all filters combine with AND. A filtered page examines at most 100 notes, so a "
            "page can be empty and still have a nextCursor: keep following nextCursor with the same "
            "filters until coverage.hasMore is false before concluding nothing matches. Needs notes:read."
        ),
        "inputSchema": _root(
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {
                    "query": {
                        "type": "string",
                        "maxLength": QUERY_MAX_CHARS,
                        "description": "Literal text to find (0 to 256 characters); empty filters nothing.",
                    },
                    "tag": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": TAG_MAX_CHARS,
                        "description": "Only notes with exactly this tag (case-sensitive).",
                    },
                    "relatedAgentId": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": RELATED_AGENT_MAX_CHARS,
                        "description": "Only notes listing exactly this agent id. Grants no access to that agent.",
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": SEARCH_LIMIT_MAX,
                        "default": SEARCH_LIMIT_DEFAULT,
                        "description": "Most notes to return on this page (1 to 50, default 20).",
                    },
                    "cursor": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": CURSOR_MAX_CHARS,
                        "description": (
                            "nextCursor from the previous page; keep query, tag and relatedAgentId unchanged."
                        ),
                    },
                },
            },
            {},
        ),
        "outputSchema": _root(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["entries", "coverage"],
                "properties": {
                    "entries": {"type": "array", "items": {"$ref": "#/definitions/EntrySummary"}},
                    "nextCursor": {"type": "string"},
                    "coverage": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["storage", "mode", "scanned", "hasMore"],
                        "properties": {
                            "storage": {"const": "active-only"},
                            "mode": {"const": "literal-substring-v1"},
                            "scanned": {"type": "integer", "minimum": 0},
                            "hasMore": {"type": "boolean"},
                        },
                    },
                },
            },
            {"EntrySummary": _ENTRY_SUMMARY, "EntryId": _ENTRY_ID, "Timestamp": _TIMESTAMP},
        ),
        "annotations": {"readOnlyHint": True, "idempotentHint": True},
    },
    {
        "name": "field_notes_update",
        "title": "Replace a field note",
        "description": (
            "Replace a note completely and return it with its revision one higher. This is not a patch: "
            "optional fields you omit are removed. expectedRevision must be the note's current revision; "
            "otherwise the result is a conflict. On conflict, get the latest note, reconcile, and send a "
            "new complete replacement; never blindly retry with a higher revision. "
            "Needs notes:read and notes:write."
        ),
        "inputSchema": _root(
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "expectedRevision", "entry"],
                "properties": {
                    "id": {"$ref": "#/definitions/EntryId"},
                    "expectedRevision": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_SAFE_INTEGER,
                        "description": "The revision you last read.",
                    },
                    "entry": {"$ref": "#/definitions/EntryInput"},
                },
            },
            {"EntryId": _ENTRY_ID, "EntryInput": _ENTRY_INPUT},
        ),
        "outputSchema": _entry_result(),
        "annotations": {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False},
    },
]

TOOLS_BY_NAME: dict[str, dict[str, Any]] = {tool["name"]: tool for tool in TOOLS}

# The scopes each tool needs, checked at HTTP level and again right before the service runs.
TOOL_SCOPES: dict[str, frozenset[str]] = {
    "field_notes_save": frozenset({READ, WRITE}),
    "field_notes_get": frozenset({READ}),
    "field_notes_search": frozenset({READ}),
    "field_notes_update": frozenset({READ, WRITE}),
}
ALL_SCOPES = (READ, WRITE)
